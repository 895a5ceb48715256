"""Names Prometheus accepts (issue #46): Debian's ``promtool check metrics`` finds nothing on a
run's live ``/metrics`` nor on its ``telemetry.om``, which ``promtool tsdb create-blocks-from
openmetrics`` imports whole; ``/metrics`` served as OpenMetrics has ``# UNIT`` and ``# HELP``
for its families. The run reports application series whose names carry abbreviated units
(``_ns``, ``_per_ms``, ``_pct``, ``_mib``): they come out in base units."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cmx_core.telemetry import openmetrics
from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings
from cmx_core.telemetry.names import BY_NAME, app_series

PROMTOOL = shutil.which("promtool")


def _promtool() -> str:
    """promtool, or a skip that says why (a failure in CI, where it is installed)."""
    if PROMTOOL is None:
        why = "promtool is not installed (as root: apt-get install -y prometheus; scripts/install.sh --test)"
        if os.environ.get("CI"):
            pytest.fail(f"required in CI: {why}")
        pytest.skip(why)
    return PROMTOOL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(promtool: str, text: str) -> None:
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stdout + done.stderr


def _get(port: int, accept: str) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.read().decode())


class _Parsed:
    """A prometheus_client collector over the families of an OpenMetrics text."""

    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))  # type: ignore[no-untyped-call]

    def collect(self) -> Iterator[Any]:
        yield from self.families


def _classic_text(openmetrics_text: str) -> str:
    """The same families and samples in Prometheus' classic text format (millisecond
    timestamps, a counter's metadata under ``<name>_total``): what ``promtool check metrics``
    reads. Converted by prometheus_client, parser and writer both."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Parsed(openmetrics_text))
    return generate_latest(registry).decode()


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[RunTelemetry]:
    port = _free_port()
    run = RunTelemetry("r-promtool", tmp_path, TelemetrySettings(interval_s=3600.0, metrics_port=port))
    run.start()  # round 1; the thread waits an hour, so only the calls below sample
    try:
        for name, value, kind in (("latency_p99_ns", 1.5e6, "gauge"), ("tokens_per_ms", 2.0, "gauge"),
                                  ("gpu_util_pct", 87.0, "gauge"), ("queries", 12.0, "counter"),
                                  ("cache_mib", 3.0, "gauge")):
            run.app.report("node/step", name, value, kind)
        for _ in range(3):
            run.sample()
        yield run
    finally:
        if run.exporter is not None and run._thread is not None and run._thread.is_alive():
            run.stop()


def test_promtool_finds_nothing_on_the_live_metrics(telemetry: RunTelemetry) -> None:
    promtool = _promtool()
    assert telemetry.exporter is not None
    port = telemetry.exporter.port
    classic = _get(port, "text/plain")
    _check(promtool, classic)
    assert "cmx_app_latency_p99_seconds" in classic and "cmx_process_cpu_cores" in classic
    om = _get(port, "application/openmetrics-text; version=1.0.0")
    typed = {line.split()[2] for line in om.splitlines() if line.startswith("# TYPE ")}
    helped = {line.split()[2] for line in om.splitlines() if line.startswith("# HELP ")}
    units = {line.split()[2]: line.split()[3] for line in om.splitlines() if line.startswith("# UNIT ")}
    assert typed and typed == helped
    for name in typed:
        unit = BY_NAME[name].unit if name in BY_NAME else name.rsplit("_", 1)[-1]
        if unit in ("seconds", "bytes", "ratio", "cores", "joules", "watts", "celsius"):
            assert units.get(name) == unit, (name, units)
    telemetry.stop()


def test_promtool_checks_and_imports_the_series_file(telemetry: RunTelemetry, tmp_path: Path) -> None:
    promtool = _promtool()
    telemetry.stop()
    series_file = tmp_path / openmetrics.SERIES_FILE
    text = series_file.read_text()
    _check(promtool, _classic_text(text))
    series = openmetrics.read_series(series_file)
    latency = series[("cmx_app_latency_p99_seconds", (("node", telemetry.node), ("run", "r-promtool"),
                                                      ("step", "node/step")))]
    assert latency[-1][1] == pytest.approx(1.5e-3)  # 1.5e6 ns
    names = {name for name, _ in series}
    assert {"cmx_app_tokens_per_second", "cmx_app_gpu_util_ratio", "cmx_app_queries_total",
            "cmx_app_cache_bytes"} <= names, names
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(series_file),
                           str(tmp_path / "tsdb")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    listed = subprocess.run([promtool, "tsdb", "list", str(tmp_path / "tsdb")], capture_output=True, text=True,
                            timeout=60)
    row = listed.stdout.splitlines()[1]
    assert int(row.split()[-4]) == sum(len(v) for v in series.values())  # every sample imported


def test_unit_words_become_base_units() -> None:
    assert app_series("latency_p99_ns") == ("cmx_app_latency_p99_seconds", 1e-9)
    assert app_series("tokens_per_ms") == ("cmx_app_tokens_per_second", 1000.0)
    assert app_series("gpu_util_pct") == ("cmx_app_gpu_util_ratio", 0.01)
    assert app_series("cache_MiB") == ("cmx_app_cache_bytes", 2.0 ** 20)
    assert app_series("completed_queries") == ("cmx_app_completed_queries", 1.0)
