"""Preparing a competition: the ``mlebench.prepare`` step, a cached node.

* An offline competition is built into the node's directory (the cmx cache): its definition
  (``competition/<id>/config.yaml``, ``description.md`` and the synthetic ``leaderboard.csv``
  computed from the baseline pool), the split (``data/<id>/prepared/{public,private}``, the
  description copied into ``public``) and ``checksums.yaml`` over the split.
* A competition whose split is already prepared in ``--data-dir`` (MLE-bench's
  ``<data-dir>/<id>/prepared/{public,private}``) is used as-is, in place: nothing is copied;
  the node records the split's checksums (and checks the competition's own MLE-bench
  ``checksums.yaml`` first when it has per-file ``public``/``private`` maps). Its definition
  comes from ``--competitions-dir`` (MLE-bench's ``mlebench/competitions``).
* A competition with raw data in ``--data-dir`` (``<data-dir>/<id>/raw``) but no prepared
  split is prepared by MLE-bench's own preparer (the definition's ``preparer``, e.g.
  ``mlebench.competitions.<id>.prepare:prepare``) when the ``mlebench`` package is
  importable: ``prepare(raw, public, private)`` writes the split into the node's directory
  (the cmx cache; the raw data is read in place). Without ``mlebench`` it is a one-line error.

``prepared_as`` says which path prepared the data: ``built`` (an offline competition),
``as-is`` (a prepared split in ``--data-dir``) or ``mlebench-preparer``.

A cache hit is re-checked against the recorded checksums (:func:`still_valid`), so a changed
split is prepared again rather than served.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import ResultsError, UsageError
from cmx_mlebench.checksums import mismatches, read_checksums, write_checksums
from cmx_mlebench.competition import Competition, check_id, load_competition, load_function
from cmx_mlebench.leaderboard import leaderboard_csv
from cmx_mlebench.offline import DEFINITIONS, is_builtin
from cmx_mlebench.offline.datasets import write_raw
from cmx_mlebench.offline.pool import pool_scores


@dataclass(frozen=True)
class Prepared:
    competition: Competition
    checksums: Path
    prepared_as: str  # built | as-is | mlebench-preparer

    def outputs(self) -> dict[str, Any]:
        c = self.competition
        return {"competition": c.id, "competition_dir": str(c.definition_dir), "data_dir": str(c.data_root),
                "public_dir": str(c.public_dir), "private_dir": str(c.private_dir), "answers": str(c.answers),
                "sample_submission": str(c.sample_submission), "checksums": str(self.checksums),
                "leaderboard_source": c.config.leaderboard_source, "prepared_as": self.prepared_as}


def _optional_dir(value: object, key: str) -> Path | None:
    if value in (None, ""):
        return None
    path = Path(str(value)).expanduser()
    if not path.is_dir():
        raise UsageError(f"--{key.replace('_', '-')}={value}: not a directory; give an existing directory "
                         "or leave it out")
    return path.resolve()


def prepare(competition: str, node_dir: Path, *, data_dir: object = "", competitions_dir: object = "") -> Prepared:
    check_id(competition)
    data = _optional_dir(data_dir, "data_dir")
    definitions = _optional_dir(competitions_dir, "competitions_dir")
    if data is not None and (data / competition / "prepared" / "public").is_dir() \
            and (data / competition / "prepared" / "private").is_dir():
        return _as_is(competition, data, definitions, node_dir)
    if data is not None and (data / competition / "raw").is_dir():
        return with_mlebench_preparer(competition, data / competition / "raw", definitions, node_dir)
    if is_builtin(competition):
        return build(competition, node_dir)
    where = f" in {data}" if data is not None else " (no --data-dir given)"
    raise UsageError(f"competition {competition!r} has no prepared split{where} and is not an offline competition "
                     f"of cmx-mlebench; prepare it with MLE-bench (mlebench prepare -c {competition}) and pass "
                     "--data-dir, or pick one of sklearn-digits, sklearn-diabetes, sklearn-breast-cancer")


def _definition(competition: str, definitions: Path | None) -> Path:
    if definitions is not None and (definitions / competition / "config.yaml").is_file():
        return definitions / competition
    if is_builtin(competition):
        return DEFINITIONS / competition
    raise UsageError(f"competition {competition!r}: no {competition}/config.yaml in --competitions-dir "
                     f"{definitions or '(not given)'}; point --competitions-dir at MLE-bench's mlebench/competitions")


def _as_is(competition: str, data: Path, definitions: Path | None, node_dir: Path) -> Prepared:
    definition = _definition(competition, definitions)
    found = load_competition(definition, data)
    prepared = data / competition / "prepared"
    theirs = definition / "checksums.yaml"
    if theirs.is_file():
        _check_theirs(prepared, theirs)
    if not found.leaderboard.is_file():
        raise UsageError(f"{found.leaderboard}: missing; the competition's definition needs its leaderboard.csv")
    checksums = node_dir / "checksums.yaml"
    write_checksums(checksums, prepared)
    return Prepared(found, checksums, "as-is")


def with_mlebench_preparer(competition: str, raw: Path, definitions: Path | None, node_dir: Path) -> Prepared:
    """Run the definition's own preparer (MLE-bench's) over ``raw`` into ``node_dir``."""
    definition = _definition(competition, definitions)
    if importlib.util.find_spec("mlebench") is None:
        raise UsageError(f"{raw}: raw data without a prepared split, and the mlebench package is not importable; "
                         f"install MLE-bench (pip install -e mle-bench) or prepare the split with it "
                         f"(mlebench prepare -c {competition})")
    found = load_competition(definition, node_dir / "data")
    preparer = load_function(found.config.preparer, f"{definition / 'config.yaml'}: preparer")
    found.public_dir.mkdir(parents=True, exist_ok=True)
    found.private_dir.mkdir(parents=True, exist_ok=True)
    preparer(raw, found.public_dir, found.private_dir)
    prepared = found.data_root / competition / "prepared"
    theirs = definition / "checksums.yaml"
    if theirs.is_file():
        _check_theirs(prepared, theirs)
    if not found.leaderboard.is_file():
        raise UsageError(f"{found.leaderboard}: missing; the competition's definition needs its leaderboard.csv")
    if not found.answers.is_file():
        raise UsageError(f"{found.answers}: the preparer {found.config.preparer} did not write the answers that "
                         "the config's dataset.answers names")
    checksums = node_dir / "checksums.yaml"
    write_checksums(checksums, prepared)
    return Prepared(found, checksums, "mlebench-preparer")


def _check_theirs(prepared: Path, path: Path) -> None:
    import yaml  # deferred: yaml only when this runs (26 modules)

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        raise ResultsError(f"{path}: not readable YAML; restore the competition's checksums.yaml") from None
    maps = {p: data.get(p) for p in ("public", "private")} if isinstance(data, Mapping) else {}
    if maps and all(isinstance(v, Mapping) for v in maps.values()):
        expected = {part: {str(k): str(v) for k, v in dict(files or {}).items()} for part, files in maps.items()}
        wrong = mismatches(prepared, {"algorithm": "md5", **expected})
        if wrong:
            raise ResultsError(f"{prepared / wrong[0]}: does not match its md5 in {path}; prepare the split again")


def build(competition: str, node_dir: Path) -> Prepared:
    """Build an offline competition into ``node_dir`` (definition, split, leaderboard, checksums)."""
    definition = node_dir / "competition" / competition
    shutil.copytree(DEFINITIONS / competition, definition, dirs_exist_ok=True)
    found = load_competition(definition, node_dir / "data")
    raw = node_dir / "data" / competition / "raw"

    write_raw(competition, raw)
    preparer = load_function(found.config.preparer, f"{definition / 'config.yaml'}: preparer")
    preparer(raw, found.public_dir, found.private_dir)
    shutil.copy2(definition / "description.md", found.public_dir / "description.md")
    grade = found.grade_fn()
    scores = pool_scores(competition, found.public_dir, found.answers, grade)
    lower = found.config.grader_name == "rmse"
    found.leaderboard.write_text(leaderboard_csv(scores, lower_is_better=lower), encoding="utf-8")
    checksums = node_dir / "checksums.yaml"
    write_checksums(checksums, found.data_root / competition / "prepared")
    return Prepared(found, checksums, "built")


def still_valid(outputs: Mapping[str, Any]) -> bool:
    """A cached preparation is served only while its split matches its checksums."""
    try:
        prepared = Path(str(outputs["data_dir"])) / str(outputs["competition"]) / "prepared"
        return not mismatches(prepared, read_checksums(Path(str(outputs["checksums"]))))
    except (KeyError, OSError, ResultsError):
        return False


def competition_from(outputs: Mapping[str, Any]) -> tuple[Competition, Path, str]:
    """The competition a prepare node describes, its checksums file and leaderboard source."""
    try:
        definition, data = Path(str(outputs["competition_dir"])), Path(str(outputs["data_dir"]))
        checksums, source = Path(str(outputs["checksums"])), str(outputs["leaderboard_source"])
    except KeyError as exc:
        raise UsageError(f"the prepare dep lacks its output {exc}; depend on the mle-bench-prepare recipe") from None
    return load_competition(definition, data), checksums, source
