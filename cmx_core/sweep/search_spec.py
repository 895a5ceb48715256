"""What ``cmx sweep --search`` is asked to find (#51): an objective (``max:METRIC`` or
``min:METRIC``), constraints on other metrics (``NAME<=X``, ``NAME>=X``), a budget (a number
of runs, or a duration such as ``10m``), the sampler's seed, the live series that may prune a point and
how many runs more confirm the best and the runner-up. Kept beside the sweep as
``search.json``, so ``cmx sweep --resume ID`` continues the same search."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.datautil import atomic_write, loads_bounded
from cmx_core.errors import ResultsError, UsageError
from cmx_core.results.numbers import finite_number

SEARCH_FILE = "search.json"
SAMPLERS = ("tpe", "gp")
"""Optuna's samplers a search may use: the Gaussian-process one (needs torch; fewer runs to
the best on the grid docs/learning.md measures) or TPE (light)."""
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smh])$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Constraint:
    """``metric <= bound`` or ``metric >= bound``."""

    metric: str
    op: str
    bound: float

    def violation(self, value: float) -> float:
        """How far ``value`` is outside the bound (0 or less: met), as Optuna's constraints read it."""
        return value - self.bound if self.op == "<=" else self.bound - value

    def text(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


@dataclass(frozen=True)
class SearchSpec:
    """The objective, its direction, the constraints, the budget (runs or seconds of the
    points' wall time) and the seed of the sampler."""

    metric: str
    maximize: bool
    constraints: tuple[Constraint, ...] = ()
    budget_runs: int | None = None
    budget_s: float | None = None
    seed: int = 0
    sampler: str = "tpe"
    prune: str | None = None
    """The application series whose live values may stop a hopeless point (None: no pruning)."""
    confirm: int = 2
    """Runs more of the best point and of the runner-up once the budget is spent: their
    spread is the noise that says how far apart the two are (0: none, noise unknown)."""

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "direction": "maximize" if self.maximize else "minimize",
                "constraints": [c.text() for c in self.constraints], "budget_runs": self.budget_runs,
                "budget_s": self.budget_s, "seed": self.seed, "sampler": self.sampler, "prune": self.prune,
                "confirm": self.confirm}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SearchSpec:
        return cls(str(value["metric"]), value["direction"] == "maximize",
                   tuple(parse_constraint(text) for text in value["constraints"]),
                   None if value["budget_runs"] is None else int(value["budget_runs"]),
                   None if value["budget_s"] is None else float(value["budget_s"]), int(value["seed"]),
                   str(value.get("sampler") or "tpe"), value.get("prune") or None, int(value.get("confirm", 0)))


def parse_objective(text: str) -> tuple[str, bool]:
    """``max:METRIC`` / ``min:METRIC`` (``maximize:``/``minimize:`` too): the metric and
    whether to maximize it."""
    direction, sep, metric = text.partition(":")
    if not sep or not metric.strip() or direction not in ("max", "min", "maximize", "minimize"):
        raise UsageError(f"--search {text!r}: expected max:METRIC or min:METRIC, e.g. --search max:items_per_second")
    return metric.strip(), direction.startswith("max")


def parse_constraint(text: str) -> Constraint:
    """``NAME<=X`` or ``NAME>=X``."""
    found = re.fullmatch(r"\s*([\w.]+)\s*(<=|>=)\s*(\S+)\s*", text)
    bound = finite_number(found.group(3)) if found else None
    if found is None or bound is None:
        raise UsageError(f"--constraint {text!r}: expected METRIC<=NUMBER or METRIC>=NUMBER, "
                         "e.g. --constraint latency_p99_ns<=5e8")
    return Constraint(found.group(1), found.group(2), bound)


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``20`` (runs) or ``90s``/``10m``/``2h`` (the points' wall time)."""
    if text.isdigit() and int(text) > 0:
        return int(text), None
    found = _DURATION.match(text)
    if found and float(found.group(1)) > 0:
        return None, float(found.group(1)) * _UNITS[found.group(2)]
    raise UsageError(f"--budget {text!r}: expected a number of runs (e.g. 20) or a duration (90s, 10m, 2h)")


def write_search(folder: Path, spec: SearchSpec) -> None:
    atomic_write(folder / SEARCH_FILE, json.dumps(spec.to_json(), indent=2, sort_keys=True))


def read_search(folder: Path) -> SearchSpec | None:
    """The search a sweep runs, or None for a grid sweep."""
    path = folder / SEARCH_FILE
    try:
        return SearchSpec.from_json(loads_bounded(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{path}: not a readable search definition ({exc}); start the search again") from None
