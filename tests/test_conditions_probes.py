"""cmx_core.conditions' probes and noise judgement against recorded sysfs/procfs trees
(tests/fixtures/conditions/): each source read, or unknown with its reason, never guessed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cmx_core.conditions.cpufreq import boost, current_khz, governor, limits_khz
from cmx_core.conditions.cpustat import cpu_times, load_average, online_cpus
from cmx_core.conditions.gpu import gpus
from cmx_core.conditions.judge import judge
from cmx_core.conditions.kernel import cpu_quota, isolated_cpus, numa_balancing, randomize_va_space
from cmx_core.conditions.record import BOUNDS, Conditions
from cmx_core.conditions.snapshot import take
from cmx_core.conditions.throttle import throttle_count
from cmx_core.conditions.values import known
from cmx_core.conditions.window import MeasuredWindow, conditions

TREES = Path(__file__).parent / "fixtures" / "conditions"


def test_a_quiet_default_machine_reads_its_kernel_and_says_why_cpufreq_is_unknown() -> None:
    root = TREES / "quiet"
    assert online_cpus(root) == (0, 1)
    assert load_average(root).value == (0.05, 0.10, 0.08)
    assert numa_balancing(root).value == 0 and randomize_va_space(root).value == 2
    assert isolated_cpus(root).value == () and cpu_quota(root).value == 0.0
    for read in (governor(root, (0, 1)), boost(root), current_khz(root, (0, 1)), throttle_count(root, (0, 1))):
        assert read.value is None and read.why  # unknown, with the reason
    assert "no_turbo" in (boost(root).why or "")
    assert "nvml.json" in (gpus(root).why or "")


def test_a_throttling_machine() -> None:
    root = TREES / "throttling"
    assert governor(root, (0, 1)).value == "powersave"
    assert boost(root).value is True
    assert current_khz(root, (0, 1)).value == (1200000, 3400000)
    assert limits_khz(root, (0, 1)).value == (800000, 3500000)
    assert throttle_count(root, (0, 1)).value == 4 * 17  # core and package counters of two CPUs
    states = gpus(root).value
    assert states is not None and states[0].throttle == ("sw_power_cap", "sw_thermal")
    assert states[0].persistence is False


def test_a_performance_governor() -> None:
    root = TREES / "performance"
    assert governor(root, (0, 1)).value == "performance"
    assert boost(root).value is False  # intel_pstate/no_turbo = 1
    assert isolated_cpus(root).value == (1,)
    states = gpus(root).value
    assert states is not None and states[0].throttle == () and states[0].persistence is True  # idle is no throttle


def test_numa_balancing_on_a_quota_and_steal() -> None:
    root = TREES / "numa-balancing"
    assert numa_balancing(root).value == 1 and randomize_va_space(root).value == 0
    assert cpu_quota(root).value == 0.5
    times = cpu_times(root, (0, 1)).value
    assert times is not None and times.steal_s > 0 and times.busy_s > 0


def _bumped(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    copy = tmp_path / name
    shutil.copytree(TREES / name, copy)
    for path, text in files.items():
        (copy / path).write_text(text)
    return copy


def test_the_judgement_names_throttling_frequency_and_gpu_causes(tmp_path: Path) -> None:
    root = TREES / "throttling"
    first = take(root, (0, 1))
    later = _bumped(tmp_path, "throttling", {"sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count": "20"})
    record = conditions(root, (0, 1), first, take(later, (0, 1)), {"OMP_NUM_THREADS": "4"})
    causes = {w.cause for w in judge(record)}
    assert record.cpu_throttle_events.value == 3
    assert causes == {"cpu_throttle_events", "freq_spread", "gpu_throttle"}
    assert record.threads["OMP_NUM_THREADS"].value == "4"
    assert record.threads["MKL_NUM_THREADS"].why  # not set: unknown, with why


def test_a_quiet_tree_gets_no_warning_and_outside_use_comes_from_proc_stat(tmp_path: Path) -> None:
    root = TREES / "quiet"
    first = take(root, (0, 1))
    busier = _bumped(tmp_path, "quiet", {"proc/stat": "cpu0 1000 0 500 50000 25 0 5 0 0 0\n"
                                                      "cpu1 1300 0 500 50000 25 0 5 0 0 0\n"})
    record = conditions(root, (0, 1), first, take(busier, (0, 1)), {})
    assert judge(record) == ()  # the recorded tree has no run: outside use is unknown, not guessed
    assert record.outside_cores.value is None and "recorded tree" in (record.outside_cores.why or "")
    assert record.run_cores.why


@pytest.mark.parametrize("tree", ["quiet", "throttling", "performance", "numa-balancing"])
def test_the_record_round_trips_through_json(tree: str) -> None:
    root = TREES / tree
    record = conditions(root, (0, 1), take(root, (0, 1)), take(root, (0, 1)), {"OMP_NUM_THREADS": "2"})
    assert Conditions.from_json(record.to_json()).to_json() == record.to_json()


def test_a_live_window_on_this_machine_is_consistent() -> None:
    record = MeasuredWindow.start().finish({})
    assert record.cpus >= 1 and record.window_s >= BOUNDS["min_window_s"]  # held open until it can be judged
    assert 0 < MeasuredWindow.start().finish({}, at_least_s=0.0).window_s < BOUNDS["min_window_s"]
    data = record.to_json()
    assert set(data["bounds"]) == {"outside_cores", "steal_cores", "freq_spread", "cpu_throttle_events",
                                   "min_window_s"}


def _busy(window_s: float, outside: float, steal: float = 0.0) -> Conditions:
    root = TREES / "quiet"
    record = conditions(root, (0, 1), take(root, (0, 1)), take(root, (0, 1)), {})
    return replace(record, window_s=window_s, outside_cores=known(outside), steal_cores=known(steal))


def test_the_outside_use_rule_names_the_cpus_and_the_fix() -> None:
    warnings = judge(_busy(2.0, 1.4, steal=0.3))
    assert [w.cause for w in warnings] == ["outside_cores", "steal_cores"]
    assert warnings[0].message.startswith("other processes used 1.4 of 2 CPUs during the run: rerun on a quiet "
                                          "machine or pin the run with taskset")
    assert judge(_busy(2.0, 0.5)) == ()  # 0.25 of 2 CPUs is the bound: at it, quiet
    assert [w.cause for w in judge(_busy(2.0, 0.51))] == ["outside_cores"]


def test_a_window_too_short_for_proc_stat_ticks_is_not_judged_on_cpu_use() -> None:
    assert judge(_busy(0.2, 1.9, steal=1.0)) == ()


class _SpyWindow:
    """Records how long ``conditions_section`` asks the window to stay open."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def finish(self, env: object = None, at_least_s: float = -1.0) -> Conditions:
        self.asked.append(at_least_s)
        return MeasuredWindow.start().finish({}, at_least_s=0.0)


@pytest.mark.parametrize(("metrics", "held"), [(True, BOUNDS["min_window_s"]), (False, 0.0)])
def test_only_a_run_with_metrics_holds_its_window_open(metrics: bool, held: float) -> None:
    """A run whose numbers a verdict judges waits until its CPU use can be judged; a detection
    or an install (no metrics) waits for nothing."""
    from cmx_core.providers.types import ExecutionOutcome, NodeResult
    from cmx_core.providers.values import Metric, ResultPart
    from cmx_core.run.conditions import conditions_section

    part = ResultPart(status="valid", benchmark={}, metrics={"rate": Metric(1.0, "1/s", True)} if metrics else {})
    node = NodeResult(node_id="n", recipe="r", status="ran", wall_s=0.01, cache_key="k", parts=(part,))
    window = _SpyWindow()
    assert conditions_section(window, ExecutionOutcome(nodes=(node,), root_outputs={}, started=0.0,  # type: ignore[arg-type]
                                                       finished=0.01)) is not None
    assert window.asked == [held]


NO_DRIVER_PROBE = """
import sys
from pathlib import Path
from cmx_core.conditions.gpu import gpus
read = gpus(Path("/"))
print(read.value, "|", read.why, "|", "pynvml" in sys.modules)
"""


def test_the_live_gpu_read_without_a_driver_is_unknown_and_loads_no_nvml() -> None:
    """No /proc/driver/nvidia and no /dev/nvidiactl: unknown, saying so, and pynvml is never
    imported (the run's conditions record pays nothing for a GPU that is not there)."""
    from cmx_core.telemetry.reading import NVIDIA_DRIVER

    if any(Path(p).exists() for p in NVIDIA_DRIVER):
        pytest.skip("this machine has the NVIDIA driver: the read goes to NVML (test_a_throttling_machine "
                    "covers the recorded form)")
    done = subprocess.run([sys.executable, "-c", NO_DRIVER_PROBE], capture_output=True, text=True, timeout=120,
                          check=True)
    value, why, loaded = (part.strip() for part in done.stdout.split("|"))
    assert value == "None" and why.startswith("NVML: no NVIDIA driver on this machine") and loaded == "False"
