"""Like with like: where two runs' conditions differ beyond their bounds (for the verdicts
of ``cmx results compare`` and ``cmx bundle replay``, issue 43 item 4). A condition differs
when one side is beyond its bound in :data:`~cmx_core.conditions.record.BOUNDS` and the
other is not, or when a setting that changes the work (governor, boost, thread settings)
has another value; a side where it is unknown is not compared (nothing is guessed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cmx_core.conditions.judge import judge
from cmx_core.conditions.record import Conditions
from cmx_core.conditions.values import Read


def differences(a: Conditions, b: Conditions, names: tuple[str, str] = ("record", "replay")) -> tuple[str, ...]:
    """Each condition that differs, as one phrase naming both sides' values
    (``other load 1.4 cores at record, 0.1 at replay``); empty when alike."""
    return tuple(_noise(a, b, names)) + tuple(_settings(a, b, names))


SHOWN = {
    "outside_cores": ("other load", "outside_cores", "cores"),
    "steal_cores": ("steal", "steal_cores", "cores"),
    "cpu_throttle_events": ("CPU throttle events", "cpu_throttle_events", ""),
    "freq_spread": ("CPU frequency range", "freq_khz", "kHz"),
    "gpu_throttle": ("GPU throttling", "gpu_throttle", ""),
}
"""Each noise cause: how it is named, the :class:`Conditions` field it reads, its unit."""


def _noise(a: Conditions, b: Conditions, names: tuple[str, str]) -> Iterator[str]:
    causes_a, causes_b = {w.cause for w in judge(a)}, {w.cause for w in judge(b)}
    for cause in sorted(causes_a ^ causes_b):
        label, field, unit = SHOWN[cause]
        left, right = getattr(a, field), getattr(b, field)
        if left.known and right.known:
            yield _pair(label, left.value, right.value, names, unit)


def _settings(a: Conditions, b: Conditions, names: tuple[str, str]) -> Iterator[str]:
    pairs: list[tuple[str, Read[Any], Read[Any]]] = [("governor", a.governor, b.governor), ("boost", a.boost, b.boost)]
    pairs += [(name, a.threads[name], b.threads[name]) for name in sorted(a.threads) if name in b.threads]
    for label, left, right in pairs:
        if left.known and right.known and left.value != right.value:
            yield _pair(label, left.value, right.value, names, "")


def _pair(label: str, left: object, right: object, names: tuple[str, str], unit: str) -> str:
    def shown(value: object) -> str:
        text = "unknown" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
        return f"{text} {unit}".strip() if value is not None else text

    return f"{label} {shown(left)} at {names[0]}, {shown(right)} at {names[1]}"
