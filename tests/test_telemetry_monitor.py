"""``cmx monitor`` (docs/telemetry.md): the scrape config promtool accepts, the dashboard's
panels and variables, ``--json`` as one document, bad input as one line and exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx_core.telemetry.monitor import PANELS, panel_queries


def test_the_prometheus_config_scrapes_each_port_and_promtool_accepts_it(cli: Callable[..., Any],
                                                                        tmp_path: Path) -> None:
    out = tmp_path / "prometheus.yml"
    result = cli("monitor", "prometheus-config", "--port", "9464", "--port", "9465", "--interval", "2",
                 "--output", out)
    assert result.code == 0, result.err
    config = yaml.safe_load(out.read_text())
    [job] = config["scrape_configs"]
    assert job["job_name"] == "cmx" and job["scrape_interval"] == "2000ms" and job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": ["127.0.0.1:9464", "127.0.0.1:9465"]}]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/install.sh --test installs Debian's prometheus as root)")
    checked = subprocess.run([promtool, "check", "config", str(out)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_json_is_one_document(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("monitor", "prometheus-config", "--port", "9464", "--json")
    assert result.code == 0 and json.loads(result.out)["what"] == "prometheus config"
    written = cli("monitor", "grafana-dashboard", "--output", tmp_path / "d.json", "--json")
    assert json.loads(written.out) == {"written": str(tmp_path / "d.json"), "what": "grafana dashboard"}
    dashboard = json.loads((tmp_path / "d.json").read_text())
    assert dashboard["uid"] == "cmx-runs" and [p["title"] for p in dashboard["panels"]] == [t for t, _, _ in PANELS]
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs == panel_queries()
    assert all(panel["datasource"] == "Prometheus" for panel in dashboard["panels"])


@pytest.mark.parametrize(("args", "message"), [
    (("prometheus-config", "--port", "x"), "--port: 'x' is not a port number"),
    (("prometheus-config", "--port", "0"), "--port: a port is 1-65535, not 0"),
    (("prometheus-config", "--port", "9464", "--interval", "0"), "--interval: the sampling interval must be"),
    (("prometheus-config",), "the following arguments are required: --port"),
    (("nothing",), "invalid choice: 'nothing'"),
])
def test_bad_input_is_one_line_exit_2(cli: Callable[..., Any], args: tuple[str, ...], message: str) -> None:
    result = cli("monitor", *args)
    assert result.code == 2 and len(result.err_lines) == 1 and message in result.err, result.err
