"""The text summary ``cmx run`` prints (import-light: the warm-run replay prints it too)."""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEY_METRICS = ("tokens_per_second", "samples_per_second", "queries_per_second", "completed_samples_per_second",
               "ttft_p99_ns", "tpot_p99_ns", "latency_p99_ns", "latency_p90_ns", "top1", "rouge1", "rougeL")
"""Metrics shown after the primary one in the run summary (the rest are in result.json)."""


def run_summary(doc: dict[str, Any], path: Any) -> str:
    bench = doc.get("benchmark", {})
    lines = [f"{doc['status'].upper()}  {bench.get('task') or doc['software']['recipe']['name']}"
             f"  ({doc['timing']['wall_s']:.3f} s)  run {doc['run_id'][:8]}"]
    metrics = doc.get("metrics") or {}
    primary = bench.get("primary_metric")
    shown = [primary] if primary in metrics else []
    shown += [name for name in KEY_METRICS if name in metrics and name not in shown]
    shown += [name for name in metrics if name not in shown][: max(0, 6 - len(shown))]
    for name in shown:
        label = name[:-3] if name.endswith("_ns") and metrics[name].get("unit") == "ns" else name
        lines.append(f"  {label:<28} {_format_metric(metrics[name])}")
    if len(metrics) > len(shown):
        lines.append(f"  ({len(metrics) - len(shown)} more metrics: cmx results show {doc['run_id'][:8]})")
    for reason in doc.get("invalid_reasons") or []:
        lines.append(f"  invalid: {reason}")
    blockers = (doc.get("mlperf") or {}).get("submission_blockers") or []
    if blockers:
        lines.append(f"  not submittable ({len(blockers)}): {blockers[0]}" + (" ..." if len(blockers) > 1 else ""))
    if not metrics:
        for key, value in (doc.get("outputs") or {}).items():
            text = json.dumps(value, default=str)
            lines.append(f"  {key}: {text if len(text) < 100 else text[:97] + '...'}")
    lines.append(f"result: {path}")
    return "\n".join(lines)


def _format_metric(metric: dict[str, Any]) -> str:
    value, unit = metric.get("value"), metric.get("unit", "")
    if not isinstance(value, (int, float)):
        return f"{'null':>12} {unit}"
    if unit == "ns":
        return f"{value / 1e6:>12.3f} ms"
    return f"{value:>12.4g} {unit}"
