"""An ALE-Bench problem package read as-is from a directory (§3.1).

The directory holds ``data.json`` (metadata, constraints, seed lists), the statements
(``statement_en.md``, ``statement_ja.md``), ``standings_scores[_lite].csv`` and
``performance.csv``, optional ``relative_results[_lite].csv``, and ``tools/`` with the
generator and the tester. ``data.json`` may nest its keys under ``metadata``,
``constraints`` and ``seeds`` or keep them at the top level; both are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx_alebench.scoring import RelativeType, parse_relative_type
from cmx_core.errors import UsageError

PROBLEM_ID = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
SEED_LISTS = ("public", "public_lite", "private", "private_lite")


@dataclass(frozen=True)
class Metadata:
    problem_id: str
    title: str
    problem_type: str
    score_type: str
    relative_score_type: RelativeType | None
    relative_max_score: int | None
    start_at: str | None
    end_at: str | None
    contest_url: str | None
    standings_source: str

    @property
    def maximize(self) -> bool:
        return self.score_type == "maximize"


@dataclass(frozen=True)
class Constraints:
    time_limit_s: float
    memory_limit_bytes: int


@dataclass(frozen=True)
class Problem:
    """A problem package: where it is and what its data.json says."""

    root: Path
    metadata: Metadata
    constraints: Constraints
    seeds: Mapping[str, tuple[int, ...]]
    allow_score_non_ac_private: bool

    @property
    def problem_id(self) -> str:
        return self.metadata.problem_id

    def standings_path(self, lite: bool) -> Path:
        lite_path = self.root / "standings_scores_lite.csv"
        return lite_path if lite and lite_path.is_file() else self.root / "standings_scores.csv"

    def relative_results_path(self, lite: bool) -> Path | None:
        path = self.root / ("relative_results_lite.csv" if lite else "relative_results.csv")
        return path if path.is_file() else None

    def seed_list(self, which: str, lite: bool) -> tuple[int, ...]:
        key = f"{which}_lite" if lite and self.seeds.get(f"{which}_lite") else which
        return self.seeds[key]

    def statement(self, language: str = "en") -> str:
        path = self.root / f"statement_{language}.md"
        return path.read_text(encoding="utf-8") if path.is_file() else ""


def _section(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    nested = data.get(name)
    return nested if isinstance(nested, Mapping) else data


def _need(block: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: Path) -> Any:
    value = block.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UsageError(f"{where}: key '{key}' is missing or not a {getattr(kind, '__name__', kind)}; "
                         "add it as ALE-Bench's data.json has it")
    return value


def _seeds(data: Mapping[str, Any], where: Path) -> dict[str, tuple[int, ...]]:
    block = _section(data, "seeds")
    seeds: dict[str, tuple[int, ...]] = {}
    for name in SEED_LISTS:
        raw = block.get(name, block.get(f"{name}_seeds", []))
        if not isinstance(raw, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in raw):
            raise UsageError(f"{where}: seeds.{name} must be a list of integers")
        seeds[name] = tuple(raw)
    for name in ("public", "private"):
        if not seeds[name]:
            raise UsageError(f"{where}: seeds.{name} is empty; a problem needs {name} seeds")
    return seeds


def _metadata(data: Mapping[str, Any], where: Path) -> Metadata:
    meta = _section(data, "metadata")
    problem_id = _need(meta, "problem_id", str, where)
    if not PROBLEM_ID.match(problem_id):
        raise UsageError(f"{where}: problem_id {problem_id!r} must be lower case letters, digits, '-' or '_'")
    score_type = _need(meta, "score_type", str, where)
    if score_type not in ("maximize", "minimize"):
        raise UsageError(f"{where}: score_type {score_type!r} must be maximize or minimize")
    problem_type = str(meta.get("problem_type", "batch"))
    if problem_type not in ("batch", "reactive"):
        raise UsageError(f"{where}: problem_type {problem_type!r} must be batch or reactive")
    relative = parse_relative_type(meta.get("relative_score_type"), str(where))
    max_score = meta.get("relative_max_score")
    if relative is not None and (not isinstance(max_score, int) or max_score <= 0):
        raise UsageError(f"{where}: relative_score_type needs a positive integer relative_max_score")
    source = str(data.get("standings_source", "ale-bench"))
    if source not in ("ale-bench", "synthetic"):
        raise UsageError(f"{where}: standings_source {source!r} must be ale-bench or synthetic")
    return Metadata(problem_id=problem_id, title=str(meta.get("title", problem_id)), problem_type=problem_type,
                    score_type=score_type, relative_score_type=relative,
                    relative_max_score=max_score if relative is not None else None,
                    start_at=_opt(meta, "start_at"), end_at=_opt(meta, "end_at"),
                    contest_url=_opt(meta, "contest_url"), standings_source=source)


def _opt(block: Mapping[str, Any], key: str) -> str | None:
    value = block.get(key)
    return None if value is None else str(value)


def _constraints(data: Mapping[str, Any], where: Path) -> Constraints:
    block = _section(data, "constraints")
    time_limit = _need(block, "time_limit", (int, float), where)
    memory = _need(block, "memory_limit", int, where)
    if time_limit <= 0 or memory <= 0:
        raise UsageError(f"{where}: time_limit and memory_limit must be positive (seconds, bytes)")
    return Constraints(float(time_limit), memory)


def load_problem(root: Path) -> Problem:
    """Read the package in ``root``; a UsageError names the file and key at fault."""
    where = root / "data.json"
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except OSError:
        raise UsageError(f"{where}: not found; a problem directory needs ALE-Bench's data.json") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: must hold a JSON object")
    metadata = _metadata(data, where)
    if not (root / "standings_scores.csv").is_file() or not (root / "performance.csv").is_file():
        raise UsageError(f"{root}: standings_scores.csv and performance.csv are required beside data.json")
    return Problem(root=root, metadata=metadata, constraints=_constraints(data, where), seeds=_seeds(data, where),
                   allow_score_non_ac_private=bool(data.get("allow_score_non_ac_private", _long(metadata))))


def _long(meta: Metadata) -> bool:
    """Whether the contest ran a day or more (ALE-Bench then scores non-AC private cases)."""
    if not meta.start_at or not meta.end_at:
        return False
    try:
        span = datetime.fromisoformat(meta.end_at) - datetime.fromisoformat(meta.start_at)
    except ValueError:
        return False
    return span.total_seconds() >= 86400


def shipped_dir() -> Path:
    """The problems that ship with this plugin (original ones, never AtCoder's)."""
    return Path(__file__).parent / "problems"


def shipped_solutions() -> Path:
    """cmx001's reference solutions (trivial, greedy) and one test solution per verdict."""
    return Path(__file__).parent / "solutions"


def find_problem(problem_id: str, dirs: Sequence[Path]) -> Problem:
    """The package ``problem_id`` from the first of ``dirs`` (then the shipped problems) holding it."""
    if not PROBLEM_ID.match(problem_id):
        raise UsageError(f"--problem {problem_id!r} is not a problem id (lower case letters, digits, '-' or '_')")
    searched = [*dirs, shipped_dir()]
    for folder in searched:
        candidate = folder / problem_id
        if (candidate / "data.json").is_file():
            return load_problem(candidate)
    known = sorted(p.name for folder in searched if folder.is_dir() for p in folder.iterdir()
                   if (p / "data.json").is_file())
    raise UsageError(f"--problem {problem_id!r} not found in {', '.join(map(str, searched))} "
                     f"(found: {', '.join(known) or 'none'}); unzip the problem there or pass --problems_dir")
