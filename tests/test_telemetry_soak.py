"""``cmx run --soak DURATION`` (docs/telemetry.md): the plan repeated with telemetry on; a
step that leaks is flagged by a 30-second soak, a steady one is not. The verdict counts
repetitions, not seconds, so a slow or busy machine changes how many repetitions there are,
not what one of them is judged to leak."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.telemetry.soak import LEAK_BYTES_PER_REPETITION, MIN_REPETITIONS, WARMUP, Repetition, slope, verdict

STEPS = '''
import time

KEPT = []


def leak(ctx):
    KEPT.append(b"x" * (1 << 20))  # 1 MiB kept per repetition
    time.sleep(0.2)
    return {}


def steady(ctx):
    block = b"x" * (1 << 20)  # 1 MiB used and freed
    time.sleep(0.2)
    return {"n": len(block)}
'''


def _soak(cli: Callable[..., Any], recipes: Any, function: str) -> dict[str, Any]:
    (recipes.dir / "soak_steps.py").write_text(STEPS)
    (recipes.dir / "soaked.yaml").write_text(
        "name: soaked\ntags: [soaked]\nsummary: soaked\ncache: false\nsteps:\n"
        f"  - uses: python\n    with: {{function: 'soak_steps:{function}'}}\n")
    result = cli("run", "--recipes", recipes.dir, "--tags=soaked", "--json", "--soak", "30s")
    assert result.code == 0, result.err
    soak: dict[str, Any] = json.loads(result.out)["telemetry"]["soak"]
    assert result.err_lines[-1].startswith(f"soak: {soak['verdict']} after {soak['repetitions']} repetitions")
    return soak


def test_a_leaking_step_is_flagged_by_a_30_second_soak(cli: Callable[..., Any], recipes: Any) -> None:
    try:
        soak = _soak(cli, recipes, "leak")
    finally:
        kept = getattr(sys.modules.get("soak_steps"), "KEPT", None)
        if kept is not None:
            kept.clear()  # give back what the leaking step kept in this process
    if soak["verdict"] == "inconclusive":
        pytest.skip(f"this machine ran too few repetitions in 30 s: {soak['reasons']}")
    assert soak["leak"] is True and soak["verdict"] == "fail", soak
    assert soak["memory_growth_bytes_per_repetition"] > LEAK_BYTES_PER_REPETITION
    assert any(r.startswith("memory grows ") for r in soak["reasons"])


def test_a_steady_step_is_not(cli: Callable[..., Any], recipes: Any) -> None:
    soak = _soak(cli, recipes, "steady")
    if soak["verdict"] == "inconclusive":
        pytest.skip(f"this machine ran too few repetitions in 30 s: {soak['reasons']}")
    assert soak["leak"] is False, soak
    assert not any(r.startswith("memory grows ") for r in soak["reasons"])


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
