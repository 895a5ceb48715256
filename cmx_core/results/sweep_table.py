"""One row per point of a ``cmx sweep``: its axis values, status and metrics, read from the
sweep's manifest and the stored results (``cmx results compare --sweep ID``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cmx_core.errors import ResultsError
from cmx_core.results.grid import Column, Grid
from cmx_core.results.numbers import fmt_number

SHORT_ID = 12
"""Characters of a run id in the table (any unique prefix is accepted)."""


@dataclass(frozen=True)
class SweepRow:
    index: int
    point: Mapping[str, str]
    status: str
    run_id: str | None
    metrics: Mapping[str, float | None]
    message: str = ""


@dataclass(frozen=True)
class SweepTable:
    sweep_id: str
    axes: tuple[str, ...]
    metrics: Mapping[str, str]  # name -> unit, in first-seen order
    rows: tuple[SweepRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "axes": list(self.axes), "metrics": dict(self.metrics),
                "rows": [asdict(r) for r in self.rows]}

    def grid(self) -> Grid:
        """One row a point: its axes' values, status, each metric (in the shared number format)
        and its run; on a narrow terminal the run column goes first, then metrics from the right."""
        metrics = tuple(self.metrics.items())
        columns = (Column("#", right=True, whole=True), *(Column(a, whole=True) for a in self.axes),
                   Column("status", whole=True),
                   *(Column(f"{m} ({u})", right=True, whole=True, drop=1 + i) for i, (m, u) in enumerate(metrics)),
                   Column("run", drop=len(metrics) + 1))
        rows = tuple((str(row.index), *(str(row.point.get(a, "")) for a in self.axes), row.status,
                      *(fmt_number(row.metrics.get(m)) for m, _ in metrics),
                      row.run_id[:SHORT_ID] if row.run_id else (row.message or "-")) for row in self.rows)
        return Grid(columns, rows)


def sweep_table(manifest: Mapping[str, Any], store: Any) -> SweepTable:
    """The table of a sweep; a point whose run is no longer in the store keeps its row with
    the reason, so no point disappears from the table."""
    axes: list[str] = [str(a) for a in manifest.get("axes") or ()]
    units: dict[str, str] = {}
    rows: list[SweepRow] = []
    for raw in manifest["points"]:
        point = {str(k): str(v) for k, v in dict(raw.get("point") or {}).items()}
        axes += [k for k in point if k not in axes]
        metrics, message = _metrics(store, raw.get("run_id"), units)
        rows.append(SweepRow(int(raw.get("index", len(rows))), point, str(raw.get("status")),
                             raw.get("run_id"), metrics, message or str(raw.get("message") or "")))
    return SweepTable(str(manifest.get("sweep_id")), tuple(axes), units, tuple(rows))


def _metrics(store: Any, run_id: Any, units: dict[str, str]) -> tuple[dict[str, float | None], str]:
    if not run_id:
        return {}, ""
    try:
        document = store.get(str(run_id)).document
    except ResultsError as exc:
        return {}, f"not in the store: {exc}"
    values: dict[str, float | None] = {}
    for name, metric in dict(document.get("metrics") or {}).items():
        units.setdefault(name, str(metric.get("unit")))
        value = metric.get("value")
        values[name] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return values, ""
