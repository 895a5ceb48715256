"""Which competitions a split run covers: those available locally.

``lite`` is MLE-bench's low-complexity split (``splits/lite.txt``, 22 competitions) as far
as their splits are prepared in ``--data-dir``, plus the shipped offline competitions;
``all`` is every offline competition plus every competition prepared in ``--data-dir`` that
has a definition in ``--competitions-dir``.
"""

from __future__ import annotations

from pathlib import Path

from cmx_mlebench.offline import BUILTIN

LITE = Path(__file__).parent / "splits" / "lite.txt"
SPLITS = ("lite", "all")


def lite_ids() -> tuple[str, ...]:
    lines = LITE.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def prepared_locally(data_dir: Path | None, competitions_dir: Path | None) -> tuple[str, ...]:
    """Competitions whose split is prepared in ``data_dir`` and whose definition is in ``competitions_dir``."""
    if data_dir is None or competitions_dir is None:
        return ()
    found = []
    for entry in sorted(data_dir.iterdir()):
        if (entry / "prepared" / "public").is_dir() and (entry / "prepared" / "private").is_dir() \
                and (competitions_dir / entry.name / "config.yaml").is_file():
            found.append(entry.name)
    return tuple(found)


def split_competitions(split: str, data_dir: Path | None, competitions_dir: Path | None) -> tuple[str, ...]:
    local = prepared_locally(data_dir, competitions_dir)
    chosen = [c for c in local if c in lite_ids()] if split == "lite" else list(local)
    return tuple(dict.fromkeys([*BUILTIN, *chosen]))
