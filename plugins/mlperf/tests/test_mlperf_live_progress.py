"""The LoadGen test reports its progress while it runs (#29 item 3, #33 item 1): the child
counts what the SUT completes to LoadGen and appends it to the step's metrics file every
second; ``cmx run`` shows it on its progress line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx_mlperf.harness.live import progress_lines
from cmx_mlperf.harness.mllog import parse_detail
from cmx_mlperf.harness.step import DETAIL, run_step


@dataclass
class _Sink:
    metrics_file: Path
    reported: dict[str, float] = field(default_factory=dict)

    def report(self, name: str, value: float, kind: str = "gauge") -> None:
        self.reported[name] = value


def _reports(path: Path) -> list[dict[str, float]]:
    """The file's reports, one dict per ``completed_samples`` line and the lines after it."""
    reports: list[dict[str, float]] = []
    for line in path.read_text().splitlines():
        name, value, *_ = line.split()
        if name == "completed_samples":
            reports.append({})
        reports[-1][name] = float(value)
    return reports


def test_a_loadgen_test_reports_completed_samples_and_tokens_while_it_runs(
        cmx_home: Any, cmx_step_context: Any, tmp_path: Path) -> None:
    ctx = cmx_step_context(params={"sut": "noop", "sut_params": {"tokens_per_sample": 4},
                                   "scenario": "SingleStream", "duration_s": 2.5, "min_query_count": 100})
    sink = _Sink(tmp_path / "app_metrics.txt")
    out = run_step(replace(ctx, metrics=sink))
    reports = _reports(sink.metrics_file)
    assert len(reports) >= 3, reports  # about one a second over 2.5 s, and the last at the end
    counts = [r["completed_samples"] for r in reports]
    assert counts == sorted(counts) and any(0 < c < counts[-1] for c in counts)  # counted during the test
    queries = parse_detail(Path(out.outputs["log_dir"]) / DETAIL).get("result_query_count")
    assert counts[-1] == queries  # in SingleStream a query is one sample: the count is LoadGen's own
    assert reports[-1]["completed_tokens"] == 4 * counts[-1]
    assert reports[-1]["live_samples_per_second"] > 0 and reports[-1]["live_tokens_per_second"] > 0
    assert sink.reported["completed_queries"] == queries  # and the final numbers, as before


def test_a_report_is_whole_lines_in_the_channels_protocol() -> None:
    assert progress_lines(120, 0, 2.0) == "completed_samples 120 counter\nlive_samples_per_second 60\n"
    assert progress_lines(10, 640, 0.5).splitlines()[2:] == ["completed_tokens 640 counter",
                                                             "live_tokens_per_second 1280"]


LOADGEN = """
name: live-loadgen
tags: [liveloadgen]
summary: a 3 s LoadGen test of the no-op SUT
steps:
  - uses: mlperf.loadgen
    with: {sut: noop, scenario: SingleStream, duration_s: 3, min_query_count: 100}
"""


def test_cmx_run_shows_loadgens_progress_on_stderr_with_json(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "live-loadgen.yaml").write_text(LOADGEN)
    result = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(tmp_path / "recipes"),
                             "--tags=liveloadgen", "--json"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "CMX_HOME": str(tmp_path / "home")}, check=False)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # the one document
    live = [ln for ln in result.stderr.splitlines()
            if re.match(r"cmx: live-loadgen/step0 \(mlperf.loadgen\) \d+\.\d s: completed_samples \d+, "
                        r"live_samples_per_second \d", ln)]
    assert len(live) >= 2, result.stderr


def test_the_llm_sut_reports_tokens_per_second_while_it_runs(
        tiny_llama: Path, cmx_home: Any, cmx_step_context: Any, tmp_path: Path) -> None:
    """The main job's SUT (hf-llm on the tiny Llama): its tokens counted live, as LoadGen gets them."""
    params = {"sut": "hf-llm", "sut_params": {"model_dir": str(tiny_llama), "max_new_tokens": 8, "batch_size": 4},
              "scenario": "Offline", "model_name": "llama3.1-8b", "duration_s": 2, "min_query_count": 1,
              "timeout_s": 300}
    sink = _Sink(tmp_path / "app_metrics.txt")
    out = run_step(replace(cmx_step_context(params=params), metrics=sink))
    reports = _reports(sink.metrics_file)
    assert len(reports) >= 2 and reports[-1]["completed_tokens"] > 0, reports
    assert reports[-1]["live_tokens_per_second"] > 0 and out.result.metrics["tokens_per_second"].value > 0
