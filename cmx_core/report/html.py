"""Render a :class:`~cmx_core.report.collect.ReportData` as one self-contained HTML page:
inline CSS, plots as base64 PNG data URIs, no script and no external resource. Rendered by a
sandboxed, autoescaping jinja2 environment (every value from a result is escaped)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cmx_core import __version__
from cmx_core.report.collect import SCORE_KEYS, ReportData, hardware_label, primary
from cmx_core.results.numbers import fmt_number

TEMPLATE = Path(__file__).resolve().parent / "templates" / "report.html.j2"
_VERDICT_CLASS = {"better": "better", "worse": "worse", "within noise": "noise", "inconclusive": "noise",
                  "missing": "dim", "same": "dim", "input": "dim", "other series": "dim"}


def fmt(value: Any) -> str:
    """A number as the terminal tables show it (:func:`~cmx_core.results.numbers.fmt_number`,
    ``-`` for a missing value); anything else as its text."""
    if value is None or isinstance(value, (bool, int, float)):
        return fmt_number(value)
    return str(value)


def render(data: ReportData) -> str:
    from jinja2 import FileSystemLoader, StrictUndefined  # deferred: jinja2 only when this runs (24 modules)
    from jinja2.sandbox import SandboxedEnvironment  # deferred: jinja2 only when this runs (25 modules)


    env = SandboxedEnvironment(loader=FileSystemLoader(str(TEMPLATE.parent)), autoescape=True,
                               undefined=StrictUndefined)
    template = env.get_template(TEMPLATE.name)
    used = [k for k in SCORE_KEYS if any(k in row for row in data.scores)]
    return template.render(
        title=data.title, generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        cmx_version=__version__, runs=[_run_row(d) for d in data.documents],
        warnings=list(data.comparison.warnings) if data.comparison else [],
        comparison=data.comparison, baseline=data.baseline, sweep=data.sweep, scores=data.scores, score_keys=used,
        figures=data.figures, fmt=fmt, verdict_class=lambda v: _VERDICT_CLASS.get(v, ""),
        faults=data.faults.lines() if data.faults else [], search=data.search,
        fault_rows=[dict(f, run_id=d["run_id"]) for d in data.documents for f in d.get("faults") or ()],
    )


def _run_row(document: Mapping[str, Any]) -> dict[str, str]:
    name = primary(document)
    metric = document["metrics"].get(name) if name else None
    origin = document["provenance"].get("origin")
    return {
        "run_id": document["run_id"], "recipe": document["software"]["recipe"]["name"],
        "status": document["status"], "created_at": document["created_at"][:19].replace("T", " "),
        "hardware": hardware_label(document),
        "primary": f"{name} = {fmt(metric['value'])} {metric['unit']}" if metric else "-",
        "wall_s": fmt(document["timing"]["wall_s"]),
        "origin": f"bundle {origin['bundle']}" if origin else "here",
    }
