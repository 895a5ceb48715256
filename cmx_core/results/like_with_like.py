"""Like with like (issue 43 item 4): may a difference between two sides' numbers be called
real, given the conditions each side was measured under?

The verdicts of ``cmx bundle replay`` and ``cmx results compare`` ask this before they say a
metric ``differs`` (or is ``better``/``worse`` beyond the noise). Each side is one or more
results; every pair (one result of each side) that both recorded a ``conditions`` section is
compared by :func:`cmx_core.conditions.compare.differences`:

* ``differ``: some pair's conditions differ beyond their bounds (``other load 1.4 cores at
  record, 0.1 at replay``): the numbers compare two machines' states, not two runs, so the
  verdict is ``inconclusive`` naming the condition, never ``differs``;
* ``noisy``: the conditions match but a side was measured beyond a noise bound (the same
  busy machine both times): no change can be told from the noise, so ``inconclusive`` too;
* ``quiet``: matching, quiet conditions: a real change is still ``differs``;
* ``not recorded``: a side has no ``conditions`` section (a result of an older cmx): the
  numbers are judged as before, and the output says ``conditions not recorded``.

Only a metric the machine's speed moves is held back (:func:`speed_bound`: a time, a rate, a
power or an energy, by its unit): load explains a slower run, never another score, count
or accuracy, so a change of those is judged on the numbers whatever the conditions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cmx_core.conditions.compare import differences
from cmx_core.conditions.judge import judge
from cmx_core.conditions.record import Conditions

State = Literal["quiet", "differ", "noisy", "not recorded"]

NOT_RECORDED = "conditions not recorded"


@dataclass(frozen=True)
class Likeness:
    """The conditions of two sides, compared: ``state`` and the phrase that says why."""

    state: State
    reason: str

    @property
    def blocks(self) -> bool:
        """Whether a change between the sides' numbers cannot be called real."""
        return self.state in ("differ", "noisy")

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason}


TIME_UNITS = frozenset({"s", "sec", "second", "seconds", "ms", "us", "µs", "ns", "min", "minutes", "h", "hours"})
SPEED_UNITS = frozenset({"hz", "khz", "mhz", "ghz", "qps", "fps", "ips", "w", "j", "kj", "wh", "kwh", "joules",
                         "watts", "flops", "tflops", "gflops"})
"""Speed units with no ``/TIME`` in them (``gb/s`` and the like are rates by their ``/s``)."""


def speed_bound(unit: str | None) -> bool:
    """Whether a metric in ``unit`` is one that a busy machine moves: a time (``s``, ``ms``,
    ``ns``...), a rate (``items/s``, ``tokens/s``, ``qps``...), a power or an energy. A metric
    with no unit counts as one (held back rather than called real)."""
    if not unit:
        return True
    text = unit.strip().lower()
    if text in TIME_UNITS or text in SPEED_UNITS:
        return True
    per = text.replace(" per ", "/").rsplit("/", 1)
    return len(per) == 2 and per[1].strip() in TIME_UNITS


def _records(documents: Sequence[Mapping[str, Any]]) -> list[Conditions]:
    return [Conditions.from_json(d["conditions"]) for d in documents if d.get("conditions")]


def compare_sides(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]],
                  names: tuple[str, str] = ("record", "replay")) -> Likeness:
    """Compare the conditions of two sides' results (``names`` names the sides in the reason)."""
    one, two = _records(before), _records(after)
    if not one or not two:
        missing = " and ".join(name for name, side in zip(names, (one, two), strict=True) if not side)
        return Likeness("not recorded", f"{NOT_RECORDED} at {missing}: the numbers are judged without them")
    found = list(dict.fromkeys(phrase for a in one for b in two for phrase in differences(a, b, names)))
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return Likeness("differ", f"conditions differ: {found[0]}{more}")
    noisy = [(name, w) for name, side in zip(names, (one, two), strict=True) for c in side for w in judge(c)]
    if noisy:
        name, warning = noisy[0]
        return Likeness("noisy", f"conditions noisy at {name} (and alike on both sides): {warning.message}")
    return Likeness("quiet", "conditions alike and quiet on both sides")
