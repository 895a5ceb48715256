"""The typed summary metrics of a run's telemetry (``telemetry.metrics`` in result.json).

Each is ``(value, unit, higher_is_better)``; one whose series was never read on this machine
is left out (its reason is in ``telemetry.unavailable``), never reported as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cmx_core.telemetry.openmetrics import Round

SummaryMetric = tuple[float, str, bool]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _values(rounds: Iterable[Round], name: str) -> list[float]:
    return [value for rnd in rounds for n, _, value in rnd.points if n == name]


def _last_per_series(rounds: Sequence[Round], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    last: dict[tuple[tuple[str, str], ...], float] = {}
    for rnd in rounds:
        for n, labels, value in rnd.points:
            if n == name:
                last[labels] = value
    return last


def summarize(rounds: Sequence[Round]) -> dict[str, SummaryMetric]:
    out: dict[str, SummaryMetric] = {}

    def peak(key: str, name: str, unit: str) -> None:
        values = _values(rounds, name)
        if values:
            out[key] = (max(values), unit, False)

    def spread(key: str, name: str, unit: str, better: bool) -> None:
        values = _values(rounds, name)
        if values:
            out[f"{key}_mean"] = (sum(values) / len(values), unit, better)
            out[f"{key}_p95"] = (percentile(values, 0.95), unit, better)

    peak("process_peak_rss_bytes", "cmx_process_resident_memory_peak_bytes", "bytes")
    spread("process_cpu_utilization", "cmx_process_cpu_utilization_ratio", "cores", False)
    spread("gpu_utilization", "cmx_gpu_utilization_ratio", "ratio", True)
    peak("gpu_memory_peak_bytes", "cmx_gpu_memory_used_bytes", "bytes")
    peak("gpu_temperature_max_celsius", "cmx_gpu_temperature_celsius", "celsius")
    energies = {}
    for key, name in (("gpu_energy_joules", "cmx_gpu_energy_joules"),
                      ("cpu_energy_joules", "cmx_node_cpu_energy_joules")):
        last = _last_per_series(rounds, name)
        if last:
            energies[key] = sum(last.values())
            out[key] = (energies[key], "J", False)
    if energies:
        out["energy_joules"] = (sum(energies.values()), "J", False)
    throttles = _last_per_series(rounds, "cmx_gpu_throttle_events")
    if throttles:
        out["gpu_throttle_events"] = (sum(throttles.values()), "count", False)
    return out
