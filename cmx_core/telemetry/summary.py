"""The typed summary metrics of a run's telemetry (``telemetry.metrics`` in result.json).

Each is ``(value, unit, higher_is_better)``; one whose series was never read on this machine
is left out (its reason is in ``telemetry.unavailable``), never reported as zero.
:class:`RunningSummary` keeps them as the rounds come (a maximum, a sum and a count, the last
value per series: constant memory however long the run); the 95th percentiles are exact,
computed once at the end from the spooled series (:meth:`.spool.SeriesSpool.values`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cmx_core.telemetry.openmetrics import Round
from cmx_core.telemetry.probes import Labels, Point

SummaryMetric = tuple[float, str, bool]
Values = Callable[[str], Iterable[Sequence[float]]]
"""Every value of a family, series by series (the spool's, or a list of rounds')."""

#: (summary key, family, unit): the highest sampled value.
PEAKS = (("process_peak_rss_bytes", "cmx_process_resident_memory_peak_bytes", "bytes"),
         ("gpu_memory_peak_bytes", "cmx_gpu_memory_used_bytes", "bytes"),
         ("gpu_temperature_max_celsius", "cmx_gpu_temperature_celsius", "celsius"))
#: (summary key, family, unit, higher is better): mean and 95th percentile.
SPREADS = (("process_cpu_utilization", "cmx_process_cpu_cores", "cores", False),
           ("gpu_utilization", "cmx_gpu_utilization_ratio", "ratio", True))
#: (summary key, family): counters, the last value per series summed.
LASTS = (("gpu_energy_joules", "cmx_gpu_energy_joules"), ("cpu_energy_joules", "cmx_node_cpu_energy_joules"),
         ("gpu_throttle_events", "cmx_gpu_throttle_events"))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class RunningSummary:
    """The summaries so far, updated one round at a time."""

    def __init__(self) -> None:
        self._peak: dict[str, float] = {}
        self._sum: dict[str, tuple[float, int]] = {}
        self._last: dict[str, dict[Labels, float]] = {}
        self._peaks = {family for _, family, _ in PEAKS}
        self._spreads = {family for _, family, _, _ in SPREADS}
        self._lasts = {family for _, family in LASTS}

    def add(self, points: Iterable[Point]) -> None:
        for name, labels, value in points:
            if name in self._peaks:
                self._peak[name] = max(value, self._peak.get(name, value))
            if name in self._spreads:
                total, count = self._sum.get(name, (0.0, 0))
                self._sum[name] = (total + value, count + 1)
            if name in self._lasts:
                self._last.setdefault(name, {})[labels] = value

    def result(self, values: Values) -> dict[str, SummaryMetric]:
        """The summaries; ``values`` gives a family's samples for its 95th percentile."""
        out: dict[str, SummaryMetric] = {}
        for key, family, unit in PEAKS:
            if family in self._peak:
                out[key] = (self._peak[family], unit, False)
        for key, family, unit, better in SPREADS:
            if family in self._sum:
                total, count = self._sum[family]
                every = [v for series in values(family) for v in series]
                out[f"{key}_mean"] = (total / count, unit, better)
                out[f"{key}_p95"] = (percentile(every, 0.95), unit, better)
        energies = {key: sum(self._last[family].values()) for key, family in LASTS[:2] if family in self._last}
        for key, value in energies.items():
            out[key] = (value, "J", False)
        if energies:
            out["energy_joules"] = (sum(energies.values()), "J", False)
        if LASTS[2][1] in self._last:
            out["gpu_throttle_events"] = (sum(self._last[LASTS[2][1]].values()), "count", False)
        return out


def summarize(rounds: Sequence[Round]) -> dict[str, SummaryMetric]:
    """The summaries of a list of rounds (what :class:`RunningSummary` gives a run)."""
    running = RunningSummary()
    for rnd in rounds:
        running.add(rnd.points)

    def values(name: str) -> list[list[float]]:
        return [[value for rnd in rounds for n, _, value in rnd.points if n == name]]

    return running.result(values)
