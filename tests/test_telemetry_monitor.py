"""``cmx monitor`` (docs/telemetry.md): the scrape config promtool accepts, the dashboard's
panels and variables, ``--json`` as one document, bad input as one line and exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx_core.telemetry.monitor import DATASOURCE, PANELS, SCHEMA_VERSION, panel_queries


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
    assert all(panel["datasource"] == DATASOURCE for panel in dashboard["panels"])


def test_every_panel_and_variable_reads_the_datasource_variable(cli: Callable[..., Any]) -> None:
    dashboard = json.loads(cli("monitor", "grafana-dashboard").out)
    assert dashboard["schemaVersion"] == SCHEMA_VERSION == 41
    source, *others = dashboard["templating"]["list"]
    assert (source["name"], source["type"], source["query"]) == ("datasource", "datasource", "prometheus")
    assert "current" not in source or source["current"].get("value") in (None, "")  # Grafana's default
    assert [v["name"] for v in others] == ["run", "node"] and all(v["datasource"] == DATASOURCE for v in others)
    for panel in dashboard["panels"]:
        assert panel["type"] == "timeseries" and panel["datasource"] == DATASOURCE
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"])
    assert "Prometheus" not in json.dumps([p["datasource"] for p in dashboard["panels"]])  # no name hard-coded
    chosen = json.loads(cli("monitor", "grafana-dashboard", "--datasource", "prom-eu").out)
    assert chosen["templating"]["list"][0]["current"] == {"selected": True, "text": "prom-eu", "value": "prom-eu"}


def _disagreements(ours: Any, model: Any, path: str = "") -> list[str]:
    """Where ``ours`` has a key the model does not, or a value the model reads otherwise."""
    if isinstance(ours, dict) and isinstance(model, dict):
        return [problem for key, value in ours.items()
                for problem in ([f"{path}.{key}: not in the model"] if key not in model
                                else _disagreements(value, model[key], f"{path}.{key}"))]
    if isinstance(ours, list) and isinstance(model, list) and len(ours) == len(model):
        pairs = enumerate(zip(ours, model, strict=True))
        return [p for i, (a, b) in pairs for p in _disagreements(a, b, f"{path}[{i}]")]
    return [] if ours == model else [f"{path}: {ours!r} read as {model!r}"]


def test_the_dashboard_is_grafanas_current_model(cli: Callable[..., Any]) -> None:
    """Decoded by Grafana's own generated model of v11.6 (grafana-foundation-sdk, a test
    dependency) and encoded again: every field of cmx's file is one the model has, with the
    value it reads, and the panels, their options and their queries decode to their types."""
    if sys.version_info < (3, 11):
        pytest.skip("grafana-foundation-sdk needs Python 3.11 (the suite's own Python is 3.11)")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard as model
    from grafana_foundation_sdk.models import prometheus, timeseries

    register_default_plugins()
    ours = json.loads(cli("monitor", "grafana-dashboard", "--datasource", "prom").out)
    decoded = model.Dashboard.from_json(ours)
    assert decoded.schema_version == SCHEMA_VERSION
    assert len(decoded.panels) == len(PANELS)
    for panel in decoded.panels:
        assert isinstance(panel, model.Panel) and panel.type_val == "timeseries"
        assert isinstance(panel.options, timeseries.Options) and isinstance(panel.field_config, model.FieldConfigSource)
        assert panel.datasource is not None and (panel.datasource.type_val, panel.datasource.uid) == \
            ("prometheus", "${datasource}")
        assert panel.targets and all(isinstance(t, prometheus.Dataquery) for t in panel.targets)
    again = json.loads(json.dumps(decoded, cls=JSONEncoder))
    assert _disagreements(ours, again) == []


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
