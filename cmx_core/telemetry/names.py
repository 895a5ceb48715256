"""The metric families the run sampler emits: Prometheus names, types, units and help, and
the node_exporter / DCGM exporter name of the same quantity where there is one.

Names follow the Prometheus conventions (``promtool check metrics`` finds nothing): base
units (seconds, bytes, joules, celsius, ratios in 0..1; CPU use in cores, ``_cores``), the
unit as a suffix, ``_total`` on counters. Every series carries the
labels ``run`` (the run id) and ``node`` (the host name); per-device families add their own
(``cpu``, ``gpu``, ``domain``); application series add ``step``. docs/telemetry.md prints
this table and tests/test_telemetry_run.py checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["gauge", "counter"]


@dataclass(frozen=True)
class Family:
    """One metric family. ``name`` is the family (a counter's samples add ``_total``);
    ``unit`` the OpenMetrics unit (empty for a count); ``same_as`` the node_exporter or DCGM
    exporter expression of the same quantity (empty where none exists)."""

    name: str
    kind: Kind
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    same_as: str = ""

    @property
    def sample_name(self) -> str:
        """The name of the samples: ``<name>_total`` for a counter, else the family name."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


def _f(name: str, kind: Kind, unit: str, help_: str, labels: tuple[str, ...] = (), same_as: str = "") -> Family:
    return Family(name, kind, unit, help_, labels, same_as)


PROCESS = (
    _f("cmx_process_cpu_seconds", "counter", "seconds",
       "CPU time (user + system) of the run's process tree", same_as="process_cpu_seconds_total (one process)"),
    _f("cmx_process_cpu_cores", "gauge", "cores",
       "CPU use of the run's process tree over the last interval, in cores (1.0 = one core busy)",
       same_as="rate(process_cpu_seconds_total[1m])"),
    _f("cmx_process_resident_memory_bytes", "gauge", "bytes", "resident memory (RSS) of the run's process tree",
       same_as="process_resident_memory_bytes (one process)"),
    _f("cmx_process_resident_memory_peak_bytes", "gauge", "bytes",
       "the highest sampled resident memory of the run's process tree so far"),
    _f("cmx_process_threads", "gauge", "", "threads in the run's process tree"),
    _f("cmx_process_processes", "gauge", "", "processes in the run's process tree"),
    _f("cmx_process_read_bytes", "counter", "bytes", "bytes the run's process tree read from storage"),
    _f("cmx_process_written_bytes", "counter", "bytes", "bytes the run's process tree wrote to storage"),
)
MACHINE = (
    _f("cmx_node_cpu_utilization_ratio", "gauge", "ratio", "busy fraction of one logical CPU over the last interval",
       ("cpu",), '1 - rate(node_cpu_seconds_total{mode="idle"}[1m])'),
    _f("cmx_node_memory_total_bytes", "gauge", "bytes", "physical memory", same_as="node_memory_MemTotal_bytes"),
    _f("cmx_node_memory_available_bytes", "gauge", "bytes", "memory available to new processes",
       same_as="node_memory_MemAvailable_bytes"),
    _f("cmx_node_disk_read_bytes", "counter", "bytes", "bytes read from every disk",
       same_as="sum(node_disk_read_bytes_total)"),
    _f("cmx_node_disk_written_bytes", "counter", "bytes", "bytes written to every disk",
       same_as="sum(node_disk_written_bytes_total)"),
    _f("cmx_node_network_receive_bytes", "counter", "bytes", "bytes received on every interface",
       same_as="sum(node_network_receive_bytes_total)"),
    _f("cmx_node_network_transmit_bytes", "counter", "bytes", "bytes sent on every interface",
       same_as="sum(node_network_transmit_bytes_total)"),
    _f("cmx_node_cpu_energy_joules", "counter", "joules", "CPU package energy (RAPL) since sampling began",
       ("domain",), "node_rapl_package_joules_total"),
)
GPU = (
    _f("cmx_gpu_utilization_ratio", "gauge", "ratio", "GPU busy fraction", ("gpu",), "DCGM_FI_DEV_GPU_UTIL / 100"),
    _f("cmx_gpu_memory_used_bytes", "gauge", "bytes", "GPU memory in use", ("gpu",),
       "DCGM_FI_DEV_FB_USED * 1048576"),
    _f("cmx_gpu_power_watts", "gauge", "watts", "GPU power draw", ("gpu",), "DCGM_FI_DEV_POWER_USAGE"),
    _f("cmx_gpu_energy_joules", "counter", "joules", "GPU energy since sampling began", ("gpu",),
       "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION / 1000 (since driver load)"),
    _f("cmx_gpu_temperature_celsius", "gauge", "celsius", "GPU core temperature", ("gpu",), "DCGM_FI_DEV_GPU_TEMP"),
    _f("cmx_gpu_throttle_events", "counter", "", "times the GPU entered a clock throttle (power, thermal, ...)",
       ("gpu",), "changes of DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
)
SAMPLER = (
    _f("cmx_telemetry_samples", "counter", "", "sampling rounds taken"),
)
FAMILIES: tuple[Family, ...] = PROCESS + MACHINE + GPU + SAMPLER
BY_NAME = {f.name: f for f in FAMILIES}

APP_PREFIX = "cmx_app_"
"""Application series (``StepContext.report``, the metrics file) are ``cmx_app_<name>``."""

#: A word of an application series' name that is a unit Prometheus does not take (an
#: abbreviation, a multiple of a base unit, a percentage) -> (the base unit, the factor).
UNIT_WORDS: dict[str, tuple[str, float]] = {
    **{w: ("seconds", 1e-9) for w in ("ns", "nsec", "nanoseconds")},
    **{w: ("seconds", 1e-6) for w in ("us", "usec", "microseconds")},
    **{w: ("seconds", 1e-3) for w in ("ms", "msec", "milliseconds")},
    **{w: ("seconds", 1.0) for w in ("s", "sec", "secs")},
    **{w: ("seconds", 60.0) for w in ("minutes",)},
    **{w: ("seconds", 3600.0) for w in ("h", "hours")},
    **{w: ("seconds", 86400.0) for w in ("d", "days")},
    "b": ("bytes", 1.0), "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "pb": ("bytes", 1e15), "kib": ("bytes", 2.0 ** 10), "mib": ("bytes", 2.0 ** 20), "gib": ("bytes", 2.0 ** 30),
    "tib": ("bytes", 2.0 ** 40), "kilobytes": ("bytes", 1e3), "megabytes": ("bytes", 1e6),
    "gigabytes": ("bytes", 1e9), "pct": ("ratio", 0.01), "percent": ("ratio", 0.01),
}
_SINGULAR = {"seconds": "second", "bytes": "byte", "ratio": "ratio"}


def app_series(name: str) -> tuple[str, float]:
    """The Prometheus name of the application series ``name`` and the factor its values
    are multiplied by: every unit word becomes its base unit (``latency_p99_ns`` ->
    ``cmx_app_latency_p99_seconds`` times 1e-9; ``tokens_per_ms`` -> ``..._per_second``
    times 1000; ``util_pct`` -> ``util_ratio`` times 0.01)."""
    words = name.split("_")
    factor = 1.0
    for i, word in enumerate(words):
        unit = UNIT_WORDS.get(word.lower())
        if unit is None:
            continue
        per = i > 0 and words[i - 1].lower() == "per"
        words[i] = _SINGULAR[unit[0]] if per else unit[0]
        factor = factor / unit[1] if per else factor * unit[1]
    return APP_PREFIX + "_".join(words), factor

RUN_LABELS = ("run", "node")


def markdown_table() -> str:
    """The families as the Markdown table docs/telemetry.md carries (a test compares them)."""
    rows = ["| series | type | unit | labels | what | node_exporter / DCGM |", "|---|---|---|---|---|---|"]
    for f in FAMILIES:
        labels = ", ".join((*RUN_LABELS, *f.labels))
        rows.append(f"| `{f.sample_name}` | {f.kind} | {f.unit or '-'} | {labels} | {f.help} | "
                    f"{'`' + f.same_as + '`' if f.same_as else '-'} |")
    return "\n".join(rows)
