"""The coverage of an imported collection: how many scripts import, plan and run here.

* import: the recipe file loads through cmx's own recipe loader (the catalog reports no error);
* plan: ``cmx plan`` resolves the recipe (its default variations) with its deps on this machine;
* run: the scripts asked for by name really run (``cmx run``), each with the variations
  named after it (``get-generic-python-lib:_package.numpy``); the others are not attempted,
  and the count says how many were attempted, never more.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx_cm.collection import ImportResult
from cmx_core import api
from cmx_core.errors import CmxError


@dataclass(frozen=True)
class RunEntry:
    name: str
    status: str  # ran | failed | not-planned
    reason: str = ""
    wall_s: float | None = None


@dataclass
class Coverage:
    scripts: int
    imported: int = 0
    planned: int = 0
    ran: int = 0
    run_attempted: int = 0
    fully_mapped: int = 0  # scripts with no key unmapped or approximated (documentation aside)
    import_errors: dict[str, str] = field(default_factory=dict)
    plan_errors: dict[str, str] = field(default_factory=dict)
    runs: list[RunEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["runs"] = [asdict(r) for r in self.runs]
        return out


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def coverage(result: ImportResult, out_dir: Path, run_patterns: Sequence[str]) -> Coverage:
    cov = Coverage(scripts=len(result.translations) + len(result.failed))
    errors: list[str] = []
    loaded = {r.name: r for r in api.list_recipes(recipes_dirs=[out_dir], errors=errors)}
    cov.fully_mapped = sum(all(i.kind == "ignored" for i in t.issues) for t in result.translations)
    for t in result.translations:
        if t.name not in loaded:
            cov.import_errors[t.name] = next((e for e in errors if t.name in e), "not loaded")
            continue
        cov.imported += 1
        tags = list(loaded[t.name].tags)
        try:
            api.plan(tags, recipes_dirs=[out_dir])
        except CmxError as exc:
            cov.plan_errors[t.name] = _one_line(exc)
            continue
        cov.planned += 1
    for t in result.translations:
        for pattern, variations in (run_pattern(p) for p in run_patterns):
            if fnmatch.fnmatchcase(t.script.alias, pattern) or fnmatch.fnmatchcase(t.name, pattern):
                found = list(loaded[t.name].tags) if t.name in loaded else None
                _run_one(cov, t.name, found, variations, out_dir)
    return cov


def run_pattern(text: str) -> tuple[str, list[str]]:
    """``get-generic-python-lib:_package.numpy`` -> the alias glob and the variations to select."""
    pattern, *variations = text.split(":")
    return pattern, [v.removeprefix("_") for v in variations if v.strip("_")]


def _run_one(cov: Coverage, name: str, tags: list[str] | None, variations: list[str], out_dir: Path) -> None:
    """Run one imported script for real (its tags plus the variations asked for) and count it."""
    shown = ":".join([name, *("_" + v for v in variations)])
    cov.run_attempted += 1
    if tags is None or name in cov.plan_errors:
        cov.runs.append(RunEntry(shown, "not-planned", cov.plan_errors.get(name, "did not import")))
        return
    start = time.perf_counter()
    try:
        api.run([*tags, *variations], recipes_dirs=[out_dir])
    except CmxError as exc:
        cov.runs.append(RunEntry(shown, "failed", _one_line(exc), round(time.perf_counter() - start, 3)))
        return
    cov.ran += 1
    cov.runs.append(RunEntry(shown, "ran", "", round(time.perf_counter() - start, 3)))
