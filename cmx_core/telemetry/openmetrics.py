"""The run's time series as OpenMetrics text with timestamps (``telemetry.om``).

One family after another (``# TYPE``, ``# UNIT``, ``# HELP``), each series' samples
contiguous and in time order (the sampler spools them as it goes: :mod:`.spool`), a Unix
timestamp in seconds on every sample, ``# EOF`` last:
the form ``promtool tsdb create-blocks-from openmetrics telemetry.om DIR`` imports into a
Prometheus TSDB. :func:`read_series` reads such a file back (through prometheus_client's
OpenMetrics parser, so the file is checked against the format as it is read).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx_core.telemetry.names import BY_NAME, Family
from cmx_core.telemetry.probes import Labels

SERIES_FILE = "telemetry.om"
MEDIA_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
APP_UNITS = ("seconds", "bytes", "ratio")
"""The units an application series' name can end in (:func:`cmx_core.telemetry.names.app_series`)."""


@dataclass(frozen=True)
class Round:
    """Every point of one sampling round, at Unix time ``t``."""

    t: float
    points: tuple[tuple[str, Labels, float], ...]


def family_of(name: str, kind: str = "gauge") -> Family:
    """The family of a point: a known one, else an application series."""
    known = BY_NAME.get(name)
    if known is not None:
        return known
    unit = name.rsplit("_", 1)[-1]
    return Family(name, "counter" if kind == "counter" else "gauge", unit if unit in APP_UNITS else "",
                  "application series (StepContext.report)", ("step",))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(labels: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + body + "}" if body else ""


def number_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else f"{value:.1f}"


def render(rounds: Iterable[Round], base: Labels, kinds: Mapping[str, str] | None = None) -> str:
    """The OpenMetrics text of ``rounds``; ``base`` labels (run, node) go on every sample;
    ``kinds`` gives an application series' kind (gauge or counter)."""
    series: dict[str, dict[Labels, list[tuple[float, float]]]] = {}
    for rnd in rounds:
        for name, labels, value in rnd.points:
            series.setdefault(name, {}).setdefault(labels, []).append((rnd.t, value))
    lines: list[str] = []
    for name in sorted(series, key=_order):
        family = family_of(name, (kinds or {}).get(name, "gauge"))
        lines.append(f"# TYPE {name} {family.kind}")
        if family.unit and name.endswith("_" + family.unit):
            lines.append(f"# UNIT {name} {family.unit}")
        lines.append(f"# HELP {name} {_escape(family.help)}")
        for labels, samples in series[name].items():
            text = label_text((*base, *labels))
            lines += [f"{family.sample_name}{text} {number_text(v)} {t:.3f}" for t, v in samples]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _order(name: str) -> tuple[int, str]:
    """Known families in the catalog's order, application series after them."""
    names = list(BY_NAME)
    return (names.index(name), "") if name in BY_NAME else (len(names), name)


def write(path: Path, rounds: Iterable[Round], base: Labels, kinds: Mapping[str, str] | None = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(rounds, base, kinds))
    tmp.replace(path)


Series = dict[tuple[str, Labels], list[tuple[float, float]]]


def read_series(path: Path) -> Series:
    """``{(sample name, sorted labels): [(timestamp, value), ...]}`` of an OpenMetrics file."""
    # deferred: prometheus_client only when this runs (77 modules)
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    out: Series = {}
    for family in text_string_to_metric_families(path.read_text()):  # type: ignore[no-untyped-call]
        for sample in family.samples:
            stamp = sample.timestamp
            t = float(stamp) if stamp is not None else math.nan  # a Timestamp or a float
            key = (sample.name, tuple(sorted(sample.labels.items())))
            out.setdefault(key, []).append((t, float(sample.value)))
    return out
