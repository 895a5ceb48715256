"""``cmx system check``: every interference source with its state, whether it is fine for
benchmarking, and the command that fixes it (pyperf's ``system show`` for ML benchmarking).

``fine`` is True or False where the source was read and has a verdict, None where it is
advice only (isolated CPUs, thread settings) or could not be read (``state`` says why).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.conditions.cpufreq import boost, governor
from cmx_core.conditions.cpustat import cpu_times, load_average, online_cpus
from cmx_core.conditions.gpu import GpuState, gpus
from cmx_core.conditions.kernel import cpu_quota, isolated_cpus, numa_balancing, randomize_va_space
from cmx_core.conditions.record import BOUNDS
from cmx_core.conditions.threads import thread_settings
from cmx_core.conditions.throttle import throttle_count
from cmx_core.conditions.values import Read
from cmx_core.telemetry.nvml import NvmlApi

SCHEMA_ID = "cmx-system-check/1"


@dataclass(frozen=True)
class Source:
    name: str
    state: str
    fine: bool | None
    fix: str
    """The command (or step) that makes it fine; empty when nothing is to be done."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "fine": self.fine, "fix": self.fix}


def system_check(root: Path = Path("/"), env: Mapping[str, str] | None = None,
                 nvml: NvmlApi | None = None) -> tuple[Source, ...]:
    """Every source, read below ``root``."""
    cpus = online_cpus(root)
    return (*_cpu_sources(root, cpus), *_kernel_sources(root, len(cpus)), *_gpu_sources(root, nvml),
            *_thread_sources(env or {}))


def report_json(root: Path, sources: tuple[Source, ...]) -> dict[str, Any]:
    """The ``--json`` document (``schemas/system-check.schema.json``)."""
    return {"schema": SCHEMA_ID, "root": str(root), "fine": not any(s.fine is False for s in sources),
            "sources": [s.to_json() for s in sources]}


def _unknown(name: str, read: Read[Any]) -> Source:
    return Source(name, f"unknown: {read.why}", None, "")


def _cpu_sources(root: Path, cpus: tuple[int, ...]) -> Iterator[Source]:
    load = load_average(root)
    bound = BOUNDS["outside_cores"] * max(len(cpus), 1)
    if load.value is None:
        yield _unknown("load average", load)
    else:
        yield Source("load average", f"{load.value[0]:.2f} (1 min) on {len(cpus)} CPUs", load.value[0] <= bound,
                     "" if load.value[0] <= bound else "wait for other jobs to finish (top shows them), or pin "
                                                       "the run to idle CPUs with taskset -c CPUS")
    yield _steal(root, cpus)
    gov = governor(root, cpus)
    yield _unknown("cpu governor", gov) if gov.value is None else Source(
        "cpu governor", gov.value, gov.value == "performance",
        "" if gov.value == "performance" else "sudo cpupower frequency-set -g performance")
    turbo = boost(root)
    yield _unknown("cpu boost/turbo", turbo) if turbo.value is None else Source(
        "cpu boost/turbo", "on" if turbo.value else "off", not turbo.value,
        "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo (or 0 to .../cpufreq/boost)"
        if turbo.value else "")
    throttled = throttle_count(root, cpus)
    yield _unknown("cpu thermal throttling", throttled) if throttled.value is None else Source(
        "cpu thermal throttling", f"{throttled.value} events since boot", throttled.value == 0,
        "" if throttled.value == 0 else "check the cooling and rerun once cool (the counters count since boot)")


def _steal(root: Path, cpus: tuple[int, ...]) -> Source:
    times = cpu_times(root, cpus)
    if times.value is None:
        return _unknown("steal time", times)
    total = times.value.busy_s + times.value.steal_s
    share = times.value.steal_s / total if total else 0.0
    fine = share <= BOUNDS["steal_cores"]
    return Source("steal time", f"{share:.1%} of busy time since boot", fine,
                  "" if fine else "use a dedicated (not shared) virtual machine or bare metal")


def _kernel_sources(root: Path, cpus: int) -> Iterator[Source]:
    numa = numa_balancing(root)
    yield _unknown("numa balancing", numa) if numa.value is None else Source(
        "numa balancing", "on" if numa.value else "off", numa.value == 0,
        "" if numa.value == 0 else "sudo sysctl -w kernel.numa_balancing=0")
    aslr = randomize_va_space(root)
    yield _unknown("aslr", aslr) if aslr.value is None else Source(
        "aslr", {0: "off", 1: "partial", 2: "full"}.get(aslr.value, str(aslr.value)), aslr.value == 2,
        "" if aslr.value == 2 else "sudo sysctl -w kernel.randomize_va_space=2 (repeats then average over layouts)")
    isolated = isolated_cpus(root)
    yield _unknown("isolated cpus", isolated) if isolated.value is None else Source(
        "isolated cpus", ",".join(map(str, isolated.value)) or "none", None,
        "" if isolated.value else "boot with isolcpus=CPUS and run with taskset -c CPUS (advice)")
    quota = cpu_quota(root)
    capped = quota.value is not None and 0 < quota.value < cpus
    yield _unknown("cgroup cpu quota", quota) if quota.value is None else Source(
        "cgroup cpu quota", f"{quota.value:g} CPUs" if quota.value else "none", not capped,
        f"the cgroup caps the run below its {cpus} CPUs: raise cpu.max or give it fewer CPUs (taskset)"
        if capped else "")


def _gpu_sources(root: Path, nvml: NvmlApi | None) -> Iterator[Source]:
    found = gpus(root, nvml)
    if found.value is None:
        yield _unknown("gpu", found)
        return
    for state in found.value:
        yield from _gpu(state)


def _gpu(state: GpuState) -> Iterator[Source]:
    name = state.device.split(":")[0]
    yield Source(f"{name} throttling", ", ".join(state.throttle) or "none", not state.throttle,
                 "check cooling and power limits: nvidia-smi -q -d PERFORMANCE" if state.throttle else "")
    if state.persistence is None:
        yield Source(f"{name} persistence mode", "unknown: not reported by NVML", None, "")
    else:
        yield Source(f"{name} persistence mode", "on" if state.persistence else "off", state.persistence,
                     "" if state.persistence else "sudo nvidia-smi -pm 1")


def _thread_sources(env: Mapping[str, str]) -> Iterator[Source]:
    for name, read in thread_settings(env).items():
        if name.startswith("torch"):
            continue  # only a run's steps load torch: cmx run records it
        yield Source(name, str(read.value) if read.value is not None else str(read.why), None,
                     "" if read.value is not None else f"export {name}=N (the threads each rank should use)")
