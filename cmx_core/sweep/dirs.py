"""Where each attempt of a sweep point runs: ``<data>/sweeps/<id>/point-<N>/`` the first
time, then ``point-<N>-r1/``, ``-r2`` ... for each resumed attempt (an earlier attempt's
directory is never reused, so its logs and error result stay as they were)."""

from __future__ import annotations

from pathlib import Path


def run_dirs(folder: Path, index: int) -> list[Path]:
    """The point's run directories so far: ``point-<N>``, then ``point-<N>-r1``, ``-r2`` ...
    (one per resumed attempt)."""
    found = [folder / f"point-{index}"]
    found += sorted((p for p in folder.glob(f"point-{index}-r*") if p.name.rsplit("-r", 1)[1].isdigit()),
                   key=lambda p: int(p.name.rsplit("-r", 1)[1]))
    return [p for p in found if p.is_dir()]


def fresh_run_dir(folder: Path, index: int) -> Path:
    """A run directory no attempt of the point has used (an empty one counts as unused)."""
    return fresh_dir(folder, f"point-{index}")


def fresh_dir(folder: Path, name: str) -> Path:
    """``folder/name``, or the first ``name-rN`` no attempt has used (an empty one counts as
    unused): a point's runs, and a search's confirmation runs (:mod:`.confirm`)."""
    first = folder / name
    if not first.exists() or (first.is_dir() and not any(first.iterdir())):
        return first
    attempt = 1
    while (folder / f"{name}-r{attempt}").exists():
        attempt += 1
    return folder / f"{name}-r{attempt}"
