"""Whether the runs given to ``cmx results compare`` measure the same thing.

Deltas between runs of different recipes or suites mean nothing (a Llama run against
demo-sort once printed ``wall_s -99.3 % better``): ``compare`` refuses them with one line
naming the first difference, unless ``--force``, which keeps every difference in the
comparison's warnings as ``not comparable: ...``. Runs of another hardware class are a
deliberate A/B: they are always compared, and flagged by
:func:`cmx_core.results.compare.hardware_warnings`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NOT_COMPARABLE = "not comparable: "
"""The prefix of a warning that ``--force`` keeps for each difference."""


@dataclass(frozen=True)
class Difference:
    """One way a run differs from the baseline: what (``recipe`` or ``suite``) and the values."""

    what: str
    run_id: str
    value: str
    baseline_id: str
    baseline_value: str

    def line(self) -> str:
        return (f"run {self.run_id} is {self.what} '{self.value}', the baseline {self.baseline_id} "
                f"{self.what} '{self.baseline_value}'")


def _recipe(document: Mapping[str, Any]) -> str:
    return str(((document.get("software") or {}).get("recipe") or {}).get("name") or "?")


def _suite(document: Mapping[str, Any]) -> str:
    return str((document.get("benchmark") or {}).get("suite") or "?")


KEYS = (("suite", _suite), ("recipe", _recipe))
"""What must agree, in the order a refusal names it."""


def differences(columns: Sequence[Sequence[Mapping[str, Any]]]) -> list[Difference]:
    """Every run (repeats included) whose suite or recipe is not the baseline's."""
    base = columns[0][0]
    found: list[Difference] = []
    for column in columns:
        for document in column:
            for what, key in KEYS:
                if key(document) != key(base):
                    found.append(Difference(what, str(document["run_id"]), key(document), str(base["run_id"]),
                                            key(base)))
    return found


def refusal(found: Sequence[Difference]) -> str:
    """The one-line error for runs that are not comparable."""
    more = f" (and {len(found) - 1} more difference{'s' if len(found) > 2 else ''})" if len(found) > 1 else ""
    return (f"cmx results compare: {found[0].line()}{more}: runs of different {found[0].what}s are not "
            "comparable; compare runs of one suite and recipe, or pass --force to compare them anyway")


def forced_warnings(found: Sequence[Difference]) -> list[str]:
    """What ``--force`` keeps of each difference, for stderr and the JSON's ``warnings``."""
    return [f"{NOT_COMPARABLE}{d.line()}: its deltas compare different {d.what}s" for d in found]
