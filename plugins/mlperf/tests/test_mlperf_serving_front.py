"""Issue 53's must-show: a serving sweep of the main job (the llama recipe on the CPU, the tiny
Llama through LoadGen's Server scenario) over three target QPS, whose report draws throughput
against p99 latency with the Pareto front marked. Every point is a real LoadGen test; the
assertions hold whatever this machine's speed (which point is on the front is not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

TARGETS = ("1", "2", "4")


def _cmx(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "CMX_HOME": str(home)}, stdin=subprocess.DEVNULL, check=False)


def test_a_serving_sweep_report_draws_the_throughput_against_p99_front(cmx_home: Path, tmp_path: Path) -> None:
    swept = _cmx("sweep", "--tags=mlperf,inference,llama", "--matrix", f"target_qps={','.join(TARGETS)}",
                 "--duration_s=1", "--min_query_count=8", "--sample_count=8", "--max_new_tokens=8", "--json",
                 home=cmx_home)
    assert swept.returncode in (0, 1), swept.stderr[-2000:]  # an INVALID point (a missed latency bound) is exit 1
    sweep = json.loads(swept.stdout)
    documents = [json.loads(Path(p["result_path"]).read_text()) for p in sweep["points"] if p.get("result_path")]
    assert len(documents) == len(TARGETS), sweep["points"]
    assert {d["benchmark"]["scenario"] for d in documents} == {"Server"}
    page = tmp_path / "serving.html"
    report = _cmx("results", "report", "--sweep", sweep["sweep_id"], "-o", str(page), "--json", home=cmx_home)
    assert report.returncode == 0, report.stderr[-2000:]
    data = json.loads(report.stdout)
    schema = Path(__file__).resolve().parents[3] / "cmx_core" / "schemas" / "report.schema.json"
    jsonschema.validate(data, json.loads(schema.read_text()))
    [traded] = [t for t in data["trade_offs"] if "p99 latency" in t["title"]]
    points = traded["points"]
    assert len(points) == len(TARGETS) and traded["y"] == "tokens/s"
    assert {p["label"] for p in points} == {f"target_qps={t}" for t in TARGETS}
    assert all(p["cost"] > 0 and p["throughput"] > 0 for p in points)
    on_front = sorted((p for p in points if p["on_front"]), key=lambda p: p["cost"])
    assert on_front and [p["throughput"] for p in on_front] == sorted(p["throughput"] for p in on_front)
    for point in points:  # off the front: some point on it has no more latency and no less throughput
        assert point["on_front"] or any(f["cost"] <= point["cost"] and f["throughput"] >= point["throughput"]
                                        for f in on_front)
    figures = data["figures"]
    assert "tokens_per_second against p99 latency (Pareto front marked)" in figures
    assert "tokens_per_second by target_qps" in figures
    assert page.read_text().count("data:image/png;base64,") == len(figures)
