"""``cmx run``'s telemetry options and ``cmx monitor`` (a Prometheus scrape config, a
Grafana dashboard). The logic is in :mod:`cmx_core.telemetry.monitor`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.recipes.durations import parse_duration
from cmx_core.telemetry.collector import TelemetrySettings, check_interval, check_port
from cmx_core.telemetry.monitor import grafana_dashboard, prometheus_config


def add_telemetry_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-telemetry", action="store_true",
                        help="do not sample the run (as CMX_TELEMETRY=0; docs/telemetry.md)")
    parser.add_argument("--telemetry-interval", metavar="SECONDS", default=None,
                        help="seconds between samples (default 1; as CMX_TELEMETRY_INTERVAL_S)")
    parser.add_argument("--metrics-port", metavar="PORT", default=None,
                        help="serve the run's live series at http://127.0.0.1:PORT/metrics (as CMX_METRICS_PORT)")
    parser.add_argument("--soak", metavar="DURATION", default=None,
                        help="repeat the measured step for DURATION (30s, 10m, 2h) and judge leaks and drift")


def telemetry_settings(args: argparse.Namespace) -> Any:
    """The run's :class:`~cmx_core.telemetry.collector.TelemetrySettings`: the environment's,
    with the command line's options over them (a bad value: one line, exit 2)."""
    settings = TelemetrySettings.from_env()
    if args.no_telemetry:
        settings = replace(settings, enabled=False)
    if args.telemetry_interval is not None:
        settings = replace(settings, interval_s=check_interval(args.telemetry_interval, "--telemetry-interval"))
    if args.metrics_port is not None:
        settings = replace(settings, metrics_port=check_port(args.metrics_port, "--metrics-port"))
    if args.soak is not None:
        seconds = parse_duration(args.soak)
        if seconds is None or seconds <= 0:
            raise UsageError(f"--soak: {args.soak!r} is not a duration (30s, 10m, 2h)")
        settings = replace(settings, soak_s=seconds)
    for option, value in (("--metrics-port", settings.metrics_port), ("--soak", settings.soak_s)):
        if value is not None and not settings.enabled:
            raise UsageError(f"{option} needs telemetry: drop --no-telemetry (or CMX_TELEMETRY=0)")
    return settings


def print_soak(document: dict[str, Any]) -> None:
    """A soak's verdict, one line on stderr (stdout keeps the one result or JSON document)."""
    soak = (document.get("telemetry") or {}).get("soak")
    if isinstance(soak, dict):
        reasons = "; ".join(soak.get("reasons") or ())
        print(f"soak: {soak['verdict']} after {soak['repetitions']} repetitions{': ' + reasons if reasons else ''}",
              file=sys.stderr)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    monitor = sub.add_parser("monitor", parents=[common], help="Prometheus and Grafana set-up for cmx runs")
    what = monitor.add_subparsers(dest="monitor_command", metavar="WHAT", required=True)
    prom = what.add_parser("prometheus-config", parents=[common],
                           help="a prometheus.yml that scrapes cmx run --metrics-port PORT")
    prom.add_argument("--port", action="append", required=True, metavar="PORT",
                      help="a port cmx runs serve /metrics on (repeatable)")
    prom.add_argument("--host", default="127.0.0.1", help="the host those runs are on (default 127.0.0.1)")
    prom.add_argument("--interval", default="1", metavar="SECONDS", help="scrape interval (default 1)")
    prom.add_argument("--output", metavar="FILE", help="write here (default: stdout)")
    prom.set_defaults(handler=cmd_prometheus_config)
    grafana = what.add_parser("grafana-dashboard", parents=[common],
                              help="a Grafana dashboard (JSON) of cmx runs' series, by run and node")
    grafana.add_argument("--output", metavar="FILE", help="write here (default: stdout)")
    grafana.add_argument("--datasource", metavar="NAME",
                         help="preselect this Prometheus data source in the dashboard's datasource variable "
                              "(default: Grafana's default one)")
    grafana.set_defaults(handler=cmd_grafana_dashboard)


def _emit(text: str, output: str | None, as_json: bool, what: str) -> int:
    if output:
        Path(output).write_text(text)
        if as_json:
            print(json.dumps({"written": output, "what": what}))
        else:
            print(f"wrote {what} to {output}", file=sys.stderr)
    elif as_json:
        print(json.dumps({"what": what, "content": text}))
    else:
        sys.stdout.write(text)
    return 0


def cmd_prometheus_config(args: argparse.Namespace) -> int:
    ports = [check_port(p, "--port") for p in args.port]
    text = prometheus_config(ports, host=args.host, interval_s=check_interval(args.interval, "--interval"))
    return _emit(text, args.output, args.json, "prometheus config")


def cmd_grafana_dashboard(args: argparse.Namespace) -> int:
    text = json.dumps(grafana_dashboard(args.datasource), indent=2, sort_keys=True) + "\n"
    return _emit(text, args.output, args.json, "grafana dashboard")
