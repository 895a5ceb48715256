"""Harness overhead: a no-op SUT driven through cmx's ``mlperf.loadgen`` step (child
process, FastSUT, completer) against the same no-op SUT driven by raw LoadGen, with the same
settings, each test in its own process. Target: cmx reaches >= 90 % of raw LoadGen's
samples/s (Offline) and queries/s (SingleStream).

    .venv/bin/python benchmarks/bench_mlperf_overhead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SETTINGS: dict[str, tuple[float, dict[str, float]]] = {
    # scenario: (duration_s, extra settings shared by both sides)
    "Offline": (1.0, {"expected_qps": 1_000_000}),
    "SingleStream": (2.0, {"expected_latency_ms": 0.002}),
}
SAMPLES = 1024
TARGET = 0.90


def raw_child(scenario: str, out_dir: str) -> None:
    """Raw LoadGen: the leanest no-op SUT (FastSUT, one QuerySamplesComplete per issue)."""
    import mlperf_loadgen as lg

    duration, extra = SETTINGS[scenario]
    response = lg.QuerySampleResponse
    complete = lg.QuerySamplesComplete

    def issue(ids: list[int], indices: list[int]) -> None:
        complete([response(i, 0, 0) for i in ids])

    sut = lg.ConstructFastSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(SAMPLES, SAMPLES, lambda x: None, lambda x: None)
    conf = Path(out_dir) / "user.conf"
    lines = [f"resnet50.{scenario}.min_duration = {round(duration * 1000)}",
             f"resnet50.{scenario}.min_query_count = 100"]
    conf.write_text("\n".join(lines) + "\n")
    settings = lg.TestSettings()
    settings.FromConfig(str(conf), "resnet50", scenario, 1)
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly
    if scenario == "Offline":
        settings.offline_expected_qps = extra["expected_qps"]
    else:
        settings.single_stream_expected_latency_ns = round(extra["expected_latency_ms"] * 1e6)
    log = lg.LogSettings()
    log.log_output.outdir = out_dir
    log.enable_trace = False
    lg.StartTestWithLogSettings(sut, qsl, settings, log)
    lg.DestroyQSL(qsl)
    lg.DestroyFastSUT(sut)


def raw(scenario: str, work: Path) -> float:
    from cmx_mlperf.harness.mllog import parse_detail

    out = Path(tempfile.mkdtemp(dir=work, prefix=f"raw-{scenario}-"))
    subprocess.run([sys.executable, __file__, "--raw-child", scenario, str(out)], check=True, cwd=out)
    log = parse_detail(out / "mlperf_log_detail.txt")
    key = "result_samples_per_second" if scenario == "Offline" else "result_qps_with_loadgen_overhead"
    return float(log.get(key))


def harness(scenario: str, work: Path) -> float:
    from cmx_core.testing import make_step_context
    from cmx_mlperf.harness.step import run_step

    duration, extra = SETTINGS[scenario]
    ctx = make_step_context(Path(tempfile.mkdtemp(dir=work, prefix=f"cmx-{scenario}-")), params={
        "sut": "noop", "sut_params": {"total_sample_count": SAMPLES}, "scenario": scenario,
        "model_name": "resnet50", "duration_s": duration, "min_query_count": 100, **extra})
    part = run_step(ctx).result
    key = "samples_per_second" if scenario == "Offline" else "queries_per_second"
    value = part.metrics[key].value if part is not None and key in part.metrics else None
    if value is None:
        raise SystemExit(f"cmx harness, {scenario}: the result has no {key} metric")
    return float(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--raw-child", nargs=2, metavar=("SCENARIO", "OUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_child:
        raw_child(*args.raw_child)
        return 0
    os.environ.setdefault("CMX_HOME", tempfile.mkdtemp(prefix="cmx-bench-home-"))
    work = Path(tempfile.mkdtemp(prefix="cmx-bench-mlperf-"))
    ok = True
    print(f"{'scenario':<13} {'raw LoadGen':>14} {'cmx harness':>14} {'ratio':>7}  "
          f"(median of {args.repeat}, unit: samples/s or queries/s)")
    for scenario in SETTINGS:
        raws, ours = [], []
        for _ in range(args.repeat):  # interleaved, so drifting machine load hits both sides
            raws.append(raw(scenario, work))
            ours.append(harness(scenario, work))
        r, h = statistics.median(raws), statistics.median(ours)
        ratio = h / r
        ok &= ratio >= TARGET
        print(f"{scenario:<13} {r:>14,.0f} {h:>14,.0f} {ratio:>6.1%}  "
              f"raw={[round(x) for x in raws]} cmx={[round(x) for x in ours]}")
    print(json.dumps({"target": TARGET, "met": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
