"""The noise judgement of one measured run: each condition beyond its bound in
:data:`~cmx_core.conditions.record.BOUNDS` becomes a warning that names the cause and what
to do. An unknown source gives no warning (nothing was seen), and no verdict: the record
says it was unknown."""

from __future__ import annotations

from collections.abc import Iterator

from cmx_core.conditions.record import BOUNDS, Conditions, NoiseWarning

QUIET = "rerun on a quiet machine or pin the run with taskset -c CPUS (cmx system check lists the sources)"


def judge(record: Conditions) -> tuple[NoiseWarning, ...]:
    """The warnings ``record`` deserves (empty: nothing seen beyond a bound)."""
    return tuple(_warnings(record))


def _warnings(c: Conditions) -> Iterator[NoiseWarning]:
    cpus = max(c.cpus, 1)
    if c.window_s >= BOUNDS["min_window_s"]:
        yield from _cpu_use(c, cpus)
    yield from _throttling(c)


def _cpu_use(c: Conditions, cpus: int) -> Iterator[NoiseWarning]:
    if c.outside_cores.value is not None and c.outside_cores.value > BOUNDS["outside_cores"] * cpus:
        yield NoiseWarning("outside_cores", f"other processes used {c.outside_cores.value:.1f} of {cpus} CPUs "
                                            f"during the run: {QUIET}")
    if c.steal_cores.value is not None and c.steal_cores.value > BOUNDS["steal_cores"] * cpus:
        yield NoiseWarning("steal_cores", f"the hypervisor stole {c.steal_cores.value:.2f} of {cpus} CPUs during "
                                          "the run: rerun on a dedicated (not shared) virtual machine")


def _throttling(c: Conditions) -> Iterator[NoiseWarning]:
    if c.cpu_throttle_events.value:
        yield NoiseWarning("cpu_throttle_events", f"the CPUs were thermally throttled {c.cpu_throttle_events.value} "
                                                  "times during the run: let the machine cool down, check its "
                                                  "cooling, and rerun")
    spread = _spread(c.freq_khz.value)
    if spread is not None and spread > BOUNDS["freq_spread"]:
        low, high = c.freq_khz.value or (0, 0)
        yield NoiseWarning("freq_spread", f"the CPU frequency moved between {low // 1000} and {high // 1000} MHz "
                                          f"(governor {c.governor.value or 'unknown'}): set the performance "
                                          "governor (sudo cpupower frequency-set -g performance)")
    if c.gpu_throttle.value:
        yield NoiseWarning("gpu_throttle", f"the GPU clocks were held down ({', '.join(c.gpu_throttle.value)}): "
                                           "check cooling and power limits (nvidia-smi -q -d PERFORMANCE) and rerun")


def _spread(freq: list[int] | None) -> float | None:
    if not freq or len(freq) != 2 or freq[1] <= 0:
        return None
    return (freq[1] - freq[0]) / freq[1]
