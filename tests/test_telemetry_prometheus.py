"""A real Prometheus (Debian's, on loopback, with the config ``cmx monitor prometheus-config``
wrote) scrapes a running ``cmx run --metrics-port``; what it stored agrees with the run's own
``telemetry.om``; every Grafana panel's query names a series the exporter emits and runs on
that server. Every wait is bounded; every process started here is stopped by its PID."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core.telemetry import names, openmetrics
from cmx_core.telemetry.monitor import PANELS, SELECTOR

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed "
                                "(scripts/install.sh --test installs Debian's as root)")
DEADLINE_S = 120.0

STEP = '''
import json, os, time, urllib.parse, urllib.request


def work(ctx):
    """Count up while Prometheus scrapes; end once it holds 4 samples of the app series and the
    test has read /metrics (a marker file), or after 120 s."""
    query = urllib.parse.urlencode({"query": 'count_over_time(cmx_app_progress[1h])'})
    deadline = time.monotonic() + 120
    i = 0
    while time.monotonic() < deadline:
        i += 1
        ctx.report("progress", i)
        time.sleep(0.1)
        try:
            with urllib.request.urlopen(ctx.params["prom"] + "/api/v1/query?" + query, timeout=5) as r:
                result = json.load(r)["data"]["result"]
        except OSError:
            continue
        if result and float(result[0]["value"][1]) >= 4 and os.path.exists(ctx.params["marker"]):
            break
    return {"count": i}
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _query(base: str, promql: str, at: float | None = None) -> Any:
    params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
    answer = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode(params))
    assert answer["status"] == "success", answer
    return answer["data"]


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def _cmx(*args: str) -> list[str]:
    return [sys.executable, "-m", "cmx_core", *args]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """Prometheus on loopback scraping the port a run will serve; yields (API URL, that port)."""
    port, web = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    made = subprocess.run(_cmx("monitor", "prometheus-config", "--port", str(port), "--interval", "0.5",
                               "--output", str(config)), capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert PROMETHEUS is not None
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prometheus did not become ready"
            time.sleep(0.2)
        yield base, port
    finally:
        _stop(proc)
        log.close()


def _metrics_page(port: int, run: subprocess.Popen[Any]) -> str:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and run.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text: str = r.read().decode()
            if "cmx_app_progress" in text:
                return text
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the run's /metrics never answered with its application series")


def test_prometheus_scrapes_a_running_cmx_run_and_agrees_with_its_series_file(
        prometheus: tuple[str, int], tmp_path: Path) -> None:
    base, port = prometheus
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "scraped_step.py").write_text(STEP)
    marker = tmp_path / "read-metrics"
    (recipes / "scraped.yaml").write_text(
        "name: scraped\ntags: [scraped]\nsummary: scraped by prometheus\ncache: false\nsteps:\n"
        f"  - uses: python\n    with: {{function: 'scraped_step:work', prom: '{base}', marker: '{marker}'}}\n")
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home")}
    out = open(tmp_path / "run.json", "wb")  # noqa: SIM115 - closed below
    run = subprocess.Popen(_cmx("run", "--recipes", str(recipes), "--tags=scraped", "--json",
                                "--metrics-port", str(port), "--telemetry-interval", "0.25"),
                           stdout=out, stderr=subprocess.PIPE, env=env)
    try:
        page = _metrics_page(port, run)
        marker.write_text("read")
        _, err = run.communicate(timeout=DEADLINE_S + 60)
    finally:
        _stop(run)
        out.close()
    assert run.returncode == 0, err.decode()[-3000:]
    doc = json.loads((tmp_path / "run.json").read_text())
    run_id = doc["run_id"]
    assert doc["telemetry"]["metrics_port"] == port

    # the exporter serves only catalogued families and application series
    served = set(re.findall(r"^(cmx_[a-z_]+?)(?:_total)?(?:\{| )", page, re.MULTILINE))
    catalog = {f.name for f in names.FAMILIES}
    assert {s for s in served if not s.startswith(names.APP_PREFIX)} <= catalog
    assert "cmx_process_cpu_seconds" in served and "cmx_app_progress" in served

    run_dir = next((tmp_path / "home").rglob(f"*{run_id[:8]}*/telemetry.om")).parent
    series = openmetrics.read_series(run_dir / "telemetry.om")
    during = 0.0
    for name in ("cmx_process_cpu_seconds_total", "cmx_app_progress"):
        scraped = _query(base, f'{name}{{run="{run_id}"}}[1h]')["result"]
        assert len(scraped) == 1, scraped
        values = [(float(t), float(v)) for t, v in scraped[0]["values"]]
        assert len(values) >= 4 if name == "cmx_app_progress" else len(values) >= 1
        labels = {k: v for k, v in scraped[0]["metric"].items() if k not in ("__name__", "job", "instance")}
        recorded = series[(name, tuple(sorted(labels.items())))]
        file_values = {v for _, v in recorded}
        for t, v in values:  # every scrape answered a value the sampler wrote ...
            assert v in file_values, (name, v)
            taken = [ft for ft, fv in recorded if fv == v]  # ... in a round taken before the scrape
            assert min(taken) <= t + 1.0
        during = max(during, values[-1][0])  # a moment the run was being scraped

    # the dashboard's queries name only emitted families and run on this server
    dashboard = json.loads(subprocess.run(_cmx("monitor", "grafana-dashboard"), capture_output=True,
                                          text=True, timeout=120, check=True).stdout)
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) == sum(len(t) for _, _, t in PANELS) and {p["title"] for p in dashboard["panels"]} == \
        {title for title, _, _ in PANELS}
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "run", "node"}
    for expr in exprs:
        named = re.findall(r"\b(cmx_[a-z_]+)", expr)
        assert named, expr
        for name in named:
            family = name.removesuffix("_total")
            assert family in catalog or name == "cmx_app_", expr
        concrete = expr.replace('run=~"$run"', f'run="{run_id}"').replace('node=~"$node"', 'node=~".+"')
        result = _query(base, concrete, during)["result"]
        if any(n.startswith(("cmx_process_", "cmx_app_")) for n in named) and "rate(" not in expr:
            assert result, f"{expr}: no series for the run"
    assert SELECTOR in exprs[0]
