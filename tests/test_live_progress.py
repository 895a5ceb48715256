"""A long step says how it is going on stderr while it runs (#33 item 1), also with --json
(stdout keeps exactly one JSON document), and -q silences it."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.cli import progress, progress_line
from cmx_core.cli.progress import Progress
from cmx_core.cli.progress_line import number, step_line
from cmx_core.telemetry.appmetrics import AppValue
from cmx_core.telemetry.collector import Usage
from cmx_core.telemetry.live import RunningStep

MEASURED = """
name: long-bench
tags: [long]
summary: a measured step of about {seconds} s that reports its own progress
cache: false
steps:
  - uses: python
    id: bench
    measures: true
    with: {{function: "long_step:work"}}
"""
STEP = """
import time

def work(ctx):
    began, done = time.monotonic(), 0
    while time.monotonic() - began < {seconds}:
        time.sleep(0.2)
        done += 1
        ctx.report("items_done", done, kind="counter")
    return {{}}
"""
LIVE = re.compile(r"^cmx: long-bench/bench \(python\) (\d+\.\d) s: items_done (\d+)")


def _recipe_dir(tmp_path: Path, seconds: float) -> Path:
    directory = tmp_path / "recipes" / "long"
    directory.mkdir(parents=True)
    (directory / "recipe.yaml").write_text(MEASURED.format(seconds=seconds))
    (directory / "long_step.py").write_text(STEP.format(seconds=seconds))
    return tmp_path / "recipes"


def _cmx(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False, stdin=subprocess.DEVNULL)


def test_a_20_second_measured_step_with_json_shows_progress_at_least_every_2_s(tmp_path: Path) -> None:
    recipes = _recipe_dir(tmp_path, 20)
    done = _cmx(tmp_path, "run", "--recipes", str(recipes), "--tags=long", "--json")
    assert done.returncode == 0, done.stderr
    document, end = json.JSONDecoder().raw_decode(done.stdout)  # exactly one JSON document
    assert done.stdout[end:].strip() == "" and document["status"] == "completed"
    live = [LIVE.match(line) for line in done.stderr.splitlines()]
    elapsed = [float(m.group(1)) for m in live if m]
    counts = [int(m.group(2)) for m in live if m]
    assert elapsed, done.stderr
    gaps = [b - a for a, b in zip([0.0, *elapsed[:-1]], elapsed, strict=True)]
    assert max(gaps) <= 2.0, (gaps, done.stderr)  # the elapsed values the lines carry, not the test's clock
    assert elapsed[-1] >= 18.0, done.stderr  # until the step's end (it ran 20 s)
    assert counts == sorted(counts) and counts[-1] > counts[0] > 0  # the step's own progress, live
    assert "cpu " in done.stderr and " MiB" in done.stderr  # and what telemetry read of the run
    lines = done.stderr.splitlines()
    assert len(lines) <= len(elapsed) + 5  # a bounded rate: about one line a second, not one per report


def test_quiet_prints_no_progress_and_no_telemetry_still_shows_the_steps_own(tmp_path: Path) -> None:
    recipes = _recipe_dir(tmp_path, 2.5)
    quiet = _cmx(tmp_path, "run", "-q", "--recipes", str(recipes), "--tags=long", "--json")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    json.loads(quiet.stdout)
    off = _cmx(tmp_path, "run", "--recipes", str(recipes), "--tags=long", "--no-telemetry")
    assert off.returncode == 0, off.stderr
    assert [line for line in off.stderr.splitlines() if LIVE.match(line)], off.stderr
    assert "rss" not in off.stderr  # nothing sampled: only what the step reported


def test_a_shell_step_writes_its_progress_to_the_metrics_file(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("shell-long", """
        name: shell-long
        tags: [shelllong]
        summary: a shell step that reports through CMX_METRICS_FILE
        cache: false
        steps:
          - uses: shell
            with: {cmd: ["sh", "-c", "echo 'cases_judged 3 counter' >> \\"$CMX_METRICS_FILE\\"; sleep 2.5"]}
        """)
    result = cli("run", "--recipes", str(recipes.dir), "--tags=shelllong", "--no-telemetry", "--json")
    assert result.code == 0, result.err
    json.loads(result.out)
    assert any(re.match(r"cmx: shell-long/step0 \(shell\) \d+\.\d s: cases_judged 3$", line)
               for line in result.err_lines), result.err


def test_the_line_shows_the_phase_elapsed_time_series_and_usage() -> None:
    step = RunningStep("llama", "bench", "mlperf.loadgen", started=100.0)
    values = [AppValue("completed_queries", "llama/bench", 120.0, "counter", 101.0),
              AppValue("live_qps", "llama/bench", 9.8765, "gauge", 101.0)]
    line = step_line(step, 112.04, values, Usage(1.934, 812 * 2**20))
    assert line == ("llama/bench (mlperf.loadgen) 12.0 s: completed_queries 120, live_qps 9.88 | "
                    "cpu 1.93 cores, rss 812 MiB")
    assert step_line(step, 101.0, [], None) == "llama/bench (mlperf.loadgen) 1.0 s"
    assert [number(v) for v in (3.0, 0.000123, 25e6 + 0.5, 2.5e7)] == ["3", "0.000123", "2.5e+07", "25000000"]


def test_a_node_that_runs_elsewhere_gets_a_line_with_its_elapsed_time(capsys: Any) -> None:
    with Progress(enabled=False, tty=False, every_s=0.01) as progress:  # a remote executor's node: no step here
        progress.cmx_node_started("train", "mlperf-train", cached=False)
        time.sleep(0.02)
        [line] = progress.live_lines()
        assert re.fullmatch(r"train \(mlperf-train\) \d+\.\d s", line), line
        progress.cmx_node_failed("train", "mlperf-train", "boom", 0.1)
        assert progress.live_lines() == []
    assert "cmx: running train (mlperf-train)" in capsys.readouterr().err


def test_the_docs_state_the_rates_and_limits_the_code_has() -> None:
    root = Path(__file__).resolve().parents[1]
    text = " ".join((root / "docs" / "telemetry.md").read_text().split())
    assert progress.PLAIN_EVERY_S == 1.0 and "a plain line is printed once a second per running step" in text
    assert progress.TERMINAL_EVERY_S == 0.5 and "redrawn in place twice a second" in text
    assert progress_line.MAX_SERIES == 6 and "at most six series" in text
    readme = " ".join((root / "README.md").read_text().split())
    assert "LoadGen's completed samples, samples/s and tokens/s so far" in readme
    assert "docs/telemetry.md#progress-on-stderr" in readme


def _read_until_exit(fd: int, proc: subprocess.Popen[str], deadline_s: float) -> bytes:
    chunks: list[bytes] = []
    ends = time.monotonic() + deadline_s
    while time.monotonic() < ends:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal's other end closed: the process is gone
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks)


def test_on_a_terminal_the_line_is_redrawn_and_stdout_keeps_the_json(tmp_path: Path) -> None:
    recipes = _recipe_dir(tmp_path, 2.5)
    master, slave = pty.openpty()
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home"), "TERM": "xterm", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes), "--tags=long",
                             "--json"], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env,
                            text=True)
    os.close(slave)
    try:
        shown = _read_until_exit(master, proc, 120)
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, shown[-2000:]
    assert json.loads(out)["status"] == "completed"  # the document on stdout, not on the terminal
    assert re.search(rb"\r\x1b\[2K[^\n]*long-bench/bench \(python\) \d+\.\d s: items_done \d+", shown), shown[-2000:]
    assert not re.search(rb"\ncmx: long-bench/bench \(python\)", shown)  # redrawn in place, not one line each
