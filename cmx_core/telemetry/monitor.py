"""What ``cmx monitor`` writes: a Prometheus scrape config for runs started with
``--metrics-port``, and a Grafana dashboard (built with ``grafanalib``, the ``monitor``
extra) of the series the sampler emits, templated by run and node."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cmx_core.errors import UsageError

JOB = "cmx"
DASHBOARD_UID = "cmx-runs"
SCHEMA_VERSION = 41
"""Grafana 11.6's dashboard schema: the model is written as that version has it (time-series
panels, data sources referred to as ``{type, uid}`` objects), so Grafana loads it without
migrating it (grafanalib's own default, 12, predates both)."""
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
"""What every panel, query and variable reads: the Prometheus that the dashboard's
``datasource`` variable picks, not one hard-coded by name."""
SELECTOR = 'run=~"$run", node=~"$node"'

#: (title, unit, [(expr, legend)]): one time-series panel each.
PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Run CPU (cores)", "none", (("cmx_process_cpu_cores{%s}", "{{run}} {{node}}"),)),
    ("Run memory (RSS)", "bytes", (("cmx_process_resident_memory_bytes{%s}", "{{run}} rss"),
                                    ("cmx_process_resident_memory_peak_bytes{%s}", "{{run}} peak"))),
    ("Run threads and processes", "none", (("cmx_process_threads{%s}", "{{run}} threads"),
                                            ("cmx_process_processes{%s}", "{{run}} processes"))),
    ("Run storage IO", "Bps", (("rate(cmx_process_read_bytes_total{%s}[1m])", "{{run}} read"),
                               ("rate(cmx_process_written_bytes_total{%s}[1m])", "{{run}} written"))),
    ("Machine CPU per core", "percentunit", (("cmx_node_cpu_utilization_ratio{%s}", "{{node}} cpu{{cpu}}"),)),
    ("Machine memory available", "bytes", (("cmx_node_memory_available_bytes{%s}", "{{node}} available"),
                                            ("cmx_node_memory_total_bytes{%s}", "{{node}} total"))),
    ("Machine disk and network", "Bps", (("rate(cmx_node_disk_read_bytes_total{%s}[1m])", "{{node}} disk read"),
                                         ("rate(cmx_node_disk_written_bytes_total{%s}[1m])", "{{node}} disk written"),
                                         ("rate(cmx_node_network_receive_bytes_total{%s}[1m])", "{{node}} rx"),
                                         ("rate(cmx_node_network_transmit_bytes_total{%s}[1m])", "{{node}} tx"))),
    ("GPU utilisation", "percentunit", (("cmx_gpu_utilization_ratio{%s}", "{{node}} gpu{{gpu}}"),)),
    ("GPU memory used", "bytes", (("cmx_gpu_memory_used_bytes{%s}", "{{node}} gpu{{gpu}}"),)),
    ("GPU power and temperature", "none", (("cmx_gpu_power_watts{%s}", "gpu{{gpu}} W"),
                                           ("cmx_gpu_temperature_celsius{%s}", "gpu{{gpu}} °C"))),
    ("GPU throttle events", "none", (("cmx_gpu_throttle_events_total{%s}", "gpu{{gpu}}"),)),
    ("Energy", "joule", (("cmx_gpu_energy_joules_total{%s}", "gpu{{gpu}}"),
                         ("cmx_node_cpu_energy_joules_total{%s}", "cpu {{domain}}"))),
    ("Application series", "none", (('{__name__=~"cmx_app_.+", %s}', "{{__name__}} {{step}}"),)),
)


def prometheus_config(ports: Sequence[int], *, host: str = "127.0.0.1", interval_s: float = 1.0) -> str:
    """A ``prometheus.yml`` scraping ``host:PORT/metrics`` for each port."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    interval = f"{max(1, round(interval_s * 1000))}ms"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{
            "job_name": JOB, "scrape_interval": interval, "scrape_timeout": interval,
            "metrics_path": "/metrics",
            "static_configs": [{"targets": [f"{host}:{port}" for port in ports]}],
        }],
    }
    header = "# written by `cmx monitor prometheus-config` (docs/telemetry.md)\n"
    return header + yaml.safe_dump(config, sort_keys=False)


def panel_queries() -> list[str]:
    """Every PromQL expression the dashboard's panels run (the dashboard test's input)."""
    return [expr % SELECTOR for _, _, targets in PANELS for expr, _ in targets]


def grafana_dashboard(datasource: str | None = None) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model at :data:`SCHEMA_VERSION`: every panel and
    variable reads the data source that the ``datasource`` variable picks (``datasource``
    preselects one by name or uid; else Grafana picks its default Prometheus)."""
    try:
        from grafanalib import core as g  # deferred: optional grafanalib, only when this runs
        from grafanalib._gen import DashboardEncoder  # deferred: optional grafanalib, only when this runs
    except ImportError:

        raise UsageError("cmx monitor grafana-dashboard needs grafanalib: pip install 'cmx-core[monitor]'") from None
    source = g.Template(name=DATASOURCE_VARIABLE, label="Prometheus", type="datasource", query="prometheus",
                        default=datasource, refresh=1)
    templates = [source, *(g.Template(name=label, label=label, dataSource=DATASOURCE, includeAll=True, multi=True,
                                      query={"query": f"label_values(cmx_telemetry_samples_total, {label})",
                                             "refId": f"{label}-values"},
                                      refresh=2, default="$__all")
                           for label in ("run", "node"))]
    panels = []
    for index, (title, unit, targets) in enumerate(PANELS):
        panels.append(g.TimeSeries(
            title=title, dataSource=DATASOURCE, unit=unit,
            targets=[g.Target(expr=expr % SELECTOR, legendFormat=legend, refId=chr(ord("A") + i),
                              datasource=DATASOURCE)
                     for i, (expr, legend) in enumerate(targets)],
            gridPos=g.GridPos(h=8, w=12, x=12 * (index % 2), y=8 * (index // 2))))
    dashboard = g.Dashboard(title="cmx runs", uid=DASHBOARD_UID, refresh="5s", time=g.Time("now-1h", "now"),
                            templating=g.Templating(list=templates), panels=panels, schemaVersion=SCHEMA_VERSION,
                            tags=["cmx"]).auto_panel_ids()
    model: dict[str, Any] = _current(json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder)))
    return model


LEGACY = {
    "dashboard": ("__inputs", "hideControls", "rows", "sharedCrosshair", "style"),
    "timepicker": ("time_options",),
    "panel": ("editable", "error"),
    "target": ("metric", "query", "step", "target"),
    "variable": ("useTags",),
    "current": ("tags",),
}
"""Fields grafanalib writes that the current dashboard schema no longer has (rows, the Graph
panel's target fields, tag-based variables): left out, so the file is the current model only
(``tests/test_telemetry_monitor.py`` decodes it with Grafana's own generated model)."""


def _current(model: dict[str, Any]) -> dict[str, Any]:
    model = _without_nulls(model)
    _drop(model, "dashboard")
    _drop(model.get("timepicker", {}), "timepicker")
    for panel in model["panels"]:
        _drop(panel, "panel")
        for target in panel.get("targets", []):
            _drop(target, "target")
    for variable in model["templating"]["list"]:
        _drop(variable, "variable")
        _drop(variable.get("current", {}), "current")
    return model


def _drop(part: dict[str, Any], kind: str) -> None:
    for key in LEGACY[kind]:
        part.pop(key, None)


def _without_nulls(value: Any) -> Any:
    """``value`` without the keys grafanalib sets to null: Grafana's schema has those fields
    optional, not nullable (``datasource: null`` on a variable is not a data source reference)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
