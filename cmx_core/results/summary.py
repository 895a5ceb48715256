"""The text summary ``cmx run`` prints (import-light: the warm-run replay prints it too).

Honest by construction: each value in its own unit (never converted or renamed), a null
metric as "not measured (why)", and every invalid or not-submittable reason in full. It fits
the terminal (``COLUMNS``, 80 when piped): a reason, warning or note wraps at its spaces
under its own indent, so no word is split; ``--wide`` (width None) keeps each on one line.
The ``result: PATH`` line stays whole, for copying and for scripts that read it.
"""

from __future__ import annotations

import json
import os
import sys

from cmx_core.results.numbers import fmt_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEY_METRICS = ("tokens_per_second", "samples_per_second", "queries_per_second", "completed_samples_per_second",
               "ttft_p99_ns", "tpot_p99_ns", "latency_p99_ns", "latency_p90_ns", "top1", "rouge1", "rougeL")
"""Metrics shown after the primary one in the run summary (the rest are in result.json)."""

PER_QUERY = ("latency", "ttft", "tpot")
"""Metric name prefixes that only a latency-bound scenario measures."""


PIPED_WIDTH = 80


def summary_width(argv: list[str] | None = None) -> int | None:
    """The width the summary fits: None under ``--wide``; else ``COLUMNS``, the terminal's
    width, or 80 when piped (as :func:`shutil.get_terminal_size`, without importing it: the
    warm run prints this summary)."""
    if "--wide" in (sys.argv[1:] if argv is None else argv):
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else PIPED_WIDTH
    except (OSError, ValueError):
        return PIPED_WIDTH


def run_summary(doc: dict[str, Any], path: Any, width: int | None = PIPED_WIDTH) -> str:
    """The lines ``cmx run`` prints, fitted to ``width`` (None: one line each)."""
    bench = doc.get("benchmark", {})
    lines = [f"{doc['status'].upper()}  {bench.get('task') or doc['software']['recipe']['name']}"
             f"  ({fmt_number(doc['timing']['wall_s'])} s)  run {doc['run_id'][:8]}"]
    metrics = doc.get("metrics") or {}
    shown = shown_metrics(metrics, bench.get("primary_metric"))
    for name in shown:
        lines += wrapped(metric_text(name, metrics[name], bench), f"  {name:<28} ", " " * 31, width)
    if len(metrics) > len(shown):
        lines.append(f"  ({len(metrics) - len(shown)} more metrics: cmx results show {doc['run_id'][:8]})")
    lines += reason_lines(doc, width)
    lines += noise_lines(doc, width)
    lines += note_lines(doc, width)
    if not metrics:
        lines += output_lines(doc, width)
    lines.append(f"result: {path}")
    return "\n".join(lines)


def output_lines(doc: dict[str, Any], width: int | None) -> list[str]:
    """A run without metrics shows its outputs, one a line, cut with an ellipsis at the width;
    a line then says where they are whole (``--wide``, ``cmx results show``)."""
    lines = []
    for key, value in (doc.get("outputs") or {}).items():
        line = f"  {key}: {json.dumps(value, default=str)}"
        limit = max(width or len(line), 20)
        lines.append(line if len(line) <= limit else line[: limit - 1] + "\u2026")
    if any(line.endswith("\u2026") for line in lines):
        lines.append(f"  (\u2026: cut; --wide shows them whole, as does cmx results show {doc['run_id'][:8]})")
    return lines


def shown_metrics(metrics: dict[str, Any], primary: str | None) -> list[str]:
    """The primary metric, then the key ones, then others up to six in all."""
    shown = [primary] if primary in metrics else []
    shown += [name for name in KEY_METRICS if name in metrics and name not in shown]
    shown += [name for name in metrics if name not in shown][: max(0, 6 - len(shown))]
    return [name for name in shown if name is not None]


def metric_text(name: str, metric: dict[str, Any], bench: dict[str, Any]) -> str:
    """``7.31 ns``, ``200,000 items`` or ``not measured (why)``."""
    value, unit = metric.get("value"), metric.get("unit", "")
    if not isinstance(value, (int, float)):
        return f"not measured ({null_reason(name, bench)})"
    return f"{fmt_number(value):>14} {unit}"


def null_reason(name: str, bench: dict[str, Any]) -> str:
    """Why a metric has no value, as far as the result document tells."""
    scenario = bench.get("scenario")
    if scenario == "Offline" and name.startswith(PER_QUERY):
        return "the Offline scenario has no per-query latency; run the Server scenario for it"
    return "the run recorded no value for it"


def reason_lines(doc: dict[str, Any], width: int | None = PIPED_WIDTH) -> list[str]:
    """Every invalid reason and every submission blocker in full, each starting a line of
    its own and wrapped at its spaces within ``width``."""
    lines: list[str] = []
    for reason in doc.get("invalid_reasons") or []:
        lines += wrapped(f"invalid: {reason}", "  ", "    ", width)
    blockers = (doc.get("mlperf") or {}).get("submission_blockers") or []
    if blockers:
        lines.append(f"  not submittable ({len(blockers)} reason{'s' if len(blockers) > 1 else ''}):")
        for blocker in blockers:
            lines += wrapped(f"- {blocker}", "    ", "      ", width)
    return lines


def noise_lines(doc: dict[str, Any], width: int | None = PIPED_WIDTH) -> list[str]:
    """The measured window's noise warnings (the ``conditions`` section, docs/busy-machine.md):
    each names its cause and what to do."""
    conditions = doc.get("conditions")
    warnings = conditions.get("warnings") if isinstance(conditions, dict) else None
    lines: list[str] = []
    for warning in warnings or ():
        if isinstance(warning, dict):
            lines += wrapped(f"warning: {warning['message']}", "  ", "    ", width)
    return lines


def note_lines(doc: dict[str, Any], width: int | None = PIPED_WIDTH) -> list[str]:
    """The result's ``notes`` (e.g. cmx-train's suspect ``scaling_efficiency`` with its likely
    causes), wrapped like the noise warnings."""
    notes = doc.get("notes")
    return wrapped(f"note: {notes}", "  ", "    ", width) if isinstance(notes, str) and notes.strip() else []


def wrapped(text: str, first: str, rest: str, width: int | None = PIPED_WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` columns (a longer word stays whole; None: one
    line), led by ``first`` (an indent, or a label such as a metric's padded name) and the
    others by ``rest`` (no textwrap: the warm run prints this)."""
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    lines: list[str] = []
    line, empty = first, True
    for word in text.split():
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line, empty = rest, True
        line += word if empty else f" {word}"
        empty = False
    return [*lines, line]


def telemetry_lines(doc: dict[str, Any]) -> list[str]:
    """``cmx results show``'s lines of the run's telemetry (docs/telemetry.md): the samples,
    each typed summary in its own unit, what could not be read, and a failure's cause."""
    lines = []
    error = doc.get("error") or {}
    if error.get("cause"):
        lines.append(f"  cause: {error['cause']}")
        lines += [f"    {line}" for line in error.get("evidence") or ()]
    tele = doc.get("telemetry")
    if not isinstance(tele, dict):
        return lines
    lines.append(f"  telemetry: {tele['samples']} samples every {fmt_number(tele['interval_s'])} s in "
                 f"{tele['series']} ({', '.join(tele['sources'])})")
    for name, metric in (tele.get("metrics") or {}).items():
        lines.append(f"    {name:<32} {fmt_number(metric['value']):>14} {metric['unit']}")
    lines += [f"    not read: {line}" for line in tele.get("unavailable") or ()]
    soak = tele.get("soak")
    if isinstance(soak, dict):
        lines.append(f"    soak: {soak['verdict']} after {soak['repetitions']} repetitions")
    return lines
