"""``cmx run --soak DURATION`` (docs/telemetry.md): the plan repeated with telemetry on; a
step that leaks is flagged by a 60-second soak sampled at 10 Hz, a steady one is not, and
cmx's own memory stays flat meanwhile (issue #46: the sampler kept every round). The verdict
counts repetitions, not seconds, so a slow or busy machine changes how many repetitions
there are, not what one of them is judged to leak; no assertion here is about time."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.telemetry import openmetrics
from cmx_core.telemetry.collector import WINDOW_ROUNDS, RunTelemetry, TelemetrySettings
from cmx_core.telemetry.soak import (
    LEAK_BYTES_PER_REPETITION,
    MIN_REPETITIONS,
    WARMUP,
    Measure,
    Repetition,
    slope,
    verdict,
)

STEPS = '''
import time

KEPT = []


def leak(ctx):
    KEPT.append(b"x" * (1 << 20))  # 1 MiB kept per repetition
    time.sleep(REPETITION_S)
    return {}


def steady(ctx):
    block = b"x" * (1 << 20)  # 1 MiB used and freed
    time.sleep(REPETITION_S)
    return {"n": len(block)}
'''
REPETITION_S = 2.0
"""Long enough for 20 sampling rounds a repetition at 10 Hz: a sampler that kept its rounds
grew by more than :data:`OWN_BOUND_BYTES` each repetition (about 100 KiB)."""
SOAK = "60s"
INTERVAL_S = "0.1"
OWN_BOUND_BYTES = 32 * 1024
"""The bound on cmx's own memory growth per repetition (the slope of the tree's RSS under a
steady step, of cmx's traced own memory under any): 32 KiB, an eighth of the leak threshold."""


def _soak(cli: Callable[..., Any], recipes: Any, function: str) -> dict[str, Any]:
    (recipes.dir / "soak_steps.py").write_text(f"REPETITION_S = {REPETITION_S}\n" + STEPS)
    (recipes.dir / "soaked.yaml").write_text(
        "name: soaked\ntags: [soaked]\nsummary: soaked\ncache: false\nsteps:\n"
        f"  - uses: python\n    with: {{function: 'soak_steps:{function}'}}\n")
    result = cli("run", "--recipes", recipes.dir, "--tags=soaked", "--json", "--soak", SOAK,
                 "--telemetry-interval", INTERVAL_S)
    assert result.code == 0, result.err
    soak: dict[str, Any] = json.loads(result.out)["telemetry"]["soak"]
    assert result.err_lines[-1].startswith(f"soak: {soak['verdict']} after {soak['repetitions']} repetitions")
    return soak


def test_a_leaking_step_is_flagged_by_a_60_second_soak(cli: Callable[..., Any], recipes: Any) -> None:
    try:
        soak = _soak(cli, recipes, "leak")
    finally:
        kept = getattr(sys.modules.get("soak_steps"), "KEPT", None)
        if kept is not None:
            kept.clear()  # give back what the leaking step kept in this process
    if soak["verdict"] == "inconclusive":
        pytest.skip(f"this machine ran too few repetitions in {SOAK}: {soak['reasons']}")
    assert soak["leak"] is True and soak["verdict"] == "fail", soak
    assert soak["memory_growth_bytes_per_repetition"] > LEAK_BYTES_PER_REPETITION
    assert any(r.startswith("memory grows ") for r in soak["reasons"])
    # the leak is the workload's: cmx's own memory, reported apart, did not grow with it
    assert soak["memory_growth_bytes_per_repetition"] == pytest.approx(1 << 20, rel=0.25), soak
    assert soak["own_memory_growth_bytes_per_repetition"] <= OWN_BOUND_BYTES, soak


def test_a_steady_step_is_not(cli: Callable[..., Any], recipes: Any) -> None:
    soak = _soak(cli, recipes, "steady")
    if soak["verdict"] == "inconclusive":
        pytest.skip(f"this machine ran too few repetitions in {SOAK}: {soak['reasons']}")
    assert soak["leak"] is False, soak
    assert not any(r.startswith("memory grows ") for r in soak["reasons"])
    assert soak["verdict"] == "pass", soak
    # a Python step with no result part: drift is judged on the wall time, each third's
    # conditions beside it (read from /proc: known on this machine)
    assert soak["drift"]["metric"] == "wall_s" and soak["drift"]["first_third"]["outside_cores_median"] is not None
    # a steady Python step holds nothing across repetitions: the tree's RSS is cmx's own
    assert soak["tree_memory_growth_bytes_per_repetition"] <= OWN_BOUND_BYTES, soak
    assert soak["own_memory_growth_bytes_per_repetition"] <= OWN_BOUND_BYTES, soak
    assert soak["own_memory_bytes"] > 0, soak


def _reps(rss: list[float], wall: float = 1.0) -> list[Repetition]:
    return [Repetition(wall, v) for v in rss]


def test_the_verdict_logic() -> None:
    base = 100e6
    steady = _reps([base + (1e5 if i % 2 else -1e5) for i in range(20)])
    assert verdict(steady, 30)["verdict"] == "pass"
    leaking = _reps([base + i * (1 << 20) for i in range(20)])
    judged = verdict(leaking, 30)
    assert judged["leak"] and judged["memory_growth_bytes_per_repetition"] == pytest.approx(1 << 20)
    slower = [Repetition(1.0 if i < 10 else 2.0, base) for i in range(20)]
    assert verdict(slower, 30)["reasons"] == ["throughput drifted: a repetition takes +100% from the first "
                                              "third to the last"]
    few = verdict(leaking[: WARMUP + MIN_REPETITIONS - 1], 30)
    assert few["verdict"] == "inconclusive" and "needs" in few["reasons"][0]
    hot = verdict(steady, 30, {"gpu_throttle_events": (3.0, "count", False),
                               "gpu_temperature_max_celsius": (88.0, "celsius", False)})
    assert hot["reasons"] == ["the GPUs throttled 3 times"] and hot["max_gpu_temperature_celsius"] == 88.0
    assert slope([1.0, 3.0, 5.0]) == 2.0 and slope([4.0]) == 0.0


def test_bad_soak_durations_are_one_line_exit_2(cli: Callable[..., Any], recipes: Any) -> None:
    (recipes.dir / "soaked.yaml").write_text("name: soaked\ntags: [soaked]\nsummary: s\nsteps:\n"
                                             "  - uses: shell\n    with: {cmd: ['true']}\n")
    for args, message in ((("--soak", "forever"), "--soak: 'forever' is not a duration (30s, 10m, 2h)"),
                          (("--soak", "30s", "--no-telemetry"), "--soak needs telemetry")):
        result = cli("run", "--recipes", recipes.dir, "--tags=soaked", *args)
        assert result.code == 2 and len(result.err_lines) == 1 and message in result.err, result.err


def test_cmx_own_memory_is_reported_apart_and_never_the_verdict() -> None:
    base = 100e6
    own_grows = [Repetition(1.0, base + i * (1 << 20), 5e6 + i * (1 << 20)) for i in range(20)]
    judged = verdict(own_grows, 30)
    assert judged["verdict"] == "pass" and judged["leak"] is False, judged
    assert judged["own_memory_growth_bytes_per_repetition"] == pytest.approx(1 << 20)
    assert judged["tree_memory_growth_bytes_per_repetition"] == pytest.approx(1 << 20)
    assert judged["memory_growth_bytes_per_repetition"] == pytest.approx(0.0, abs=1.0)
    workload_grows = [Repetition(1.0, base + i * (1 << 20), 5e6) for i in range(20)]
    assert verdict(workload_grows, 30)["leak"] is True


def test_the_sampler_keeps_the_same_memory_however_long_it_runs(tmp_path: Path) -> None:
    """What the sampler holds rises and falls with the batch of lines not yet spooled; its
    highest over 400 rounds is its highest over the 200 rounds before (window full)."""
    telemetry = RunTelemetry("r-own", tmp_path, TelemetrySettings(interval_s=3600.0))
    telemetry.start()  # round 1; the thread waits an hour, so only the calls below sample
    sizes = []
    try:
        for i in range(600 + 3 * WINDOW_ROUNDS):
            telemetry.app.report("n/s", "progress", float(i))
            telemetry.sample()
            sizes.append(telemetry.own_bytes())
    finally:
        telemetry.stop()
    early, late = max(sizes[-600:-400]), max(sizes[-400:])
    assert 0 < late <= early + 4096, (early, late)
    assert telemetry.samples == 2 + 600 + 3 * WINDOW_ROUNDS
    assert len(openmetrics.read_series(tmp_path / openmetrics.SERIES_FILE)[
        ("cmx_telemetry_samples_total", (("node", telemetry.node), ("run", "r-own")))]) == telemetry.samples


def test_rounds_in_one_millisecond_or_back_in_time_are_all_kept_in_order(tmp_path: Path) -> None:
    """A round whose time is not later than the one before is stamped 1 ms after it: a
    repeated timestamp is a sample OpenMetrics readers drop (prometheus_client's parser does)."""
    from cmx_core.telemetry.spool import SeriesSpool

    spool = SeriesSpool(tmp_path / openmetrics.SERIES_FILE, (("run", "r"),))
    for t, value in ((100.0004, 1.0), (100.0004, 2.0), (100.0001, 3.0), (99.0, 4.0), (100.5, 5.0)):
        spool.add(t, (("cmx_telemetry_samples", (), value),), {})
    spool.finish()
    read = openmetrics.read_series(tmp_path / openmetrics.SERIES_FILE)
    stamped = [(100.0, 1.0), (100.001, 2.0), (100.002, 3.0), (100.003, 4.0), (100.5, 5.0)]
    assert read[("cmx_telemetry_samples_total", (("run", "r"),))] == stamped


def test_the_docs_state_the_bound_this_test_holds() -> None:
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "telemetry.md").read_text().split())
    assert (f"{SOAK.removesuffix('s')} s of {REPETITION_S:g}-second repetitions sampled at "
            f"{1 / float(INTERVAL_S):g} Hz") in doc
    assert f"at {OWN_BOUND_BYTES // 1024} KiB per repetition" in doc


def _judged(metric: list[float], noise_last: bool = False) -> dict[str, Any]:
    reps = [Repetition(1.0, 100e6, 0.0, value, 0.05 if i < 14 or not noise_last else 1.6,
                       ("outside_cores",) if noise_last and i >= 14 else ())
            for i, value in enumerate(metric)]
    return verdict(reps, 30, None, Measure("samples_per_second", "samples/s", True))


def test_drift_is_judged_on_the_workloads_metric_with_each_thirds_conditions() -> None:
    """The wall time of a repetition stays 1 s: only the primary metric moves (a LoadGen
    test that recalibrates keeps its duration and changes its QPS)."""
    falls = [100.0] * 10 + [40.0] * 10
    quiet = _judged(falls)
    assert quiet["verdict"] == "fail" and quiet["reasons"] == [
        "throughput drifted: samples_per_second moved -60% from the first third to the last"]
    drift = quiet["drift"]
    assert (drift["metric"], drift["unit"], drift["higher_is_better"]) == ("samples_per_second", "samples/s", True)
    assert (drift["first_third_median"], drift["last_third_median"]) == (100.0, 40.0)
    assert drift["first_third"] == {"repetitions": 6, "outside_cores_median": 0.05, "noisy_repetitions": 0,
                                    "noise": []}
    busy = _judged(falls, noise_last=True)  # the other processes took 1.6 cores in the last third
    assert busy["verdict"] == "inconclusive" and busy["leak"] is False, busy
    [doubt] = busy["reasons"]
    assert doubt.startswith("throughput drifted: samples_per_second moved -60% from the first third to the last, "
                            "but the machine was not quiet in the last third (first third: 0 of 6 noisy, other "
                            "processes 0.05 cores; last third: 6 of 6 noisy (outside_cores), other processes "
                            "1.60 cores): rerun on a quiet machine")
    assert _judged([100.0] * 20, noise_last=True)["verdict"] == "pass"  # no drift: the noise changes nothing


def test_without_a_primary_metric_in_every_repetition_drift_is_the_wall_time() -> None:
    reps = [Repetition(1.0 if i < 10 else 2.0, 100e6, 0.0, None if i == 3 else 5.0) for i in range(20)]
    judged = verdict(reps, 30, None, Measure("samples_per_second", "samples/s", True))
    assert judged["drift"]["metric"] == "wall_s" and judged["verdict"] == "fail"
    assert judged["reasons"] == ["throughput drifted: a repetition takes +100% from the first third to the last"]


def test_the_primary_metric_of_a_repetition_is_read_from_its_result_part() -> None:
    from cmx_core.providers.types import ExecutionOutcome, NodeResult, RunError
    from cmx_core.providers.values import Metric, ResultPart
    from cmx_core.run.observe import primary_measure, primary_value

    part = ResultPart("valid", {"suite": "custom", "primary_metric": "qps"},
                      {"qps": Metric(812.5, "queries/s", True), "p99": Metric(3.0, "ms", False)})
    ran = ExecutionOutcome((NodeResult("n", "r", "ran", 1.0, "k", parts=(part,)),), {}, 0.0, 1.0)
    assert primary_measure(ran) == Measure("qps", "queries/s", True) and primary_value(ran) == 812.5
    failed = ExecutionOutcome(ran.nodes, {}, 0.0, 1.0, RunError("boom"))
    plain = ExecutionOutcome((NodeResult("n", "r", "ran", 1.0, "k"),), {}, 0.0, 1.0)
    assert primary_value(failed) is primary_value(plain) is primary_measure(plain) is None
