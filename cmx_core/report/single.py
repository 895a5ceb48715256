"""``cmx results plot``: one figure, one metric: along a sweep's first axis, or across runs
(repeats of one lock grouped: median with min..max)."""

from __future__ import annotations

from typing import Any

from cmx_core.errors import UsageError
from cmx_core.report import plots
from cmx_core.report.collect import Selection, metric_series, primary, select
from cmx_core.report.columns import group_by_lock


def single_plot(store: Any, selection: Selection, metric: str | None) -> tuple[str, bytes]:
    """``(title, PNG bytes)``; a metric no selected run reports is a UsageError."""
    _title, documents, table = select(store, selection)
    if not documents:
        raise UsageError("cmx results plot: none of the selected runs is in the store")
    name = metric or primary(documents[0])
    if name is None or not any(name in d["metrics"] for d in documents):
        known = sorted({m for d in documents for m in d["metrics"]})
        raise UsageError(f"--metric {name}: no selected run reports it; use one of {', '.join(known) or '(none)'}")
    unit = next(d["metrics"][name]["unit"] for d in documents if name in d["metrics"])
    if table is not None:
        x_axis, series = plots.sweep_series(table.axes, table.rows, name)
        return f"{name} by {x_axis}", plots.lines(f"{name} by {x_axis}", x_axis, unit, series)
    return f"{name} across runs", plots.bars(f"{name} (median, min..max of repeats)", unit,
                                                 metric_series(group_by_lock(documents), name))
