"""The PeakQPS curve as files: ``peak_curve.csv`` always, ``peak_curve.png`` when matplotlib
is importable (it is optional: the CSV and the result's ``mlperf.peak_search.curve`` hold
the same numbers)."""

from __future__ import annotations

import csv
import importlib
from pathlib import Path
from typing import Any

from cmx_mlperf.harness.peak import Point, Search

CSV_NAME = "peak_curve.csv"
PNG_NAME = "peak_curve.png"
COLUMNS = ("target_qps", "result_validity", "verdict", "phase", "completed_qps", "tokens_per_second",
           "latency_p99_ns", "ttft_p99_ns", "tpot_p99_ns", "query_count", "log_dir")


def write_csv(found: Search, directory: Path) -> Path:
    """One row per measured point, sorted by QPS, with a ``peak`` column."""
    path = directory / CSV_NAME
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow((*COLUMNS, "peak"))
        for point in found.curve():
            row = point.as_dict()
            writer.writerow((*("" if row[c] is None else row[c] for c in COLUMNS), point is found.peak))
    return path


def write_png(found: Search, directory: Path) -> Path | None:
    """Tokens/s (or completed QPS without tokens) against latency p99, TTFT p99 and TPOT p99;
    VALID points filled, INVALID hollow, the peak starred. None without matplotlib."""
    try:  # imported by name: matplotlib is optional and has no stubs here
        importlib.import_module("matplotlib").use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return None
    curve = found.curve()
    tokens = any(p.tokens_per_second is not None for p in curve)
    x_label = "tokens/s" if tokens else "completed queries/s"
    series = [("latency p99", "latency_p99_ns"), ("TTFT p99", "ttft_p99_ns"), ("TPOT p99", "tpot_p99_ns")]
    shown = [(label, key) for label, key in series if any(getattr(p, key) is not None for p in curve)]
    figure, axes = plt.subplots(1, len(shown) or 1, figsize=(5 * max(1, len(shown)), 4), squeeze=False)
    for axis, (label, key) in zip(axes[0], shown, strict=False):
        _plot_series(axis, curve, found.peak, key, tokens)
        axis.set_xlabel(x_label)
        axis.set_ylabel(f"{label} (ms)")
        axis.grid(True, alpha=0.3)
        axis.set_title("filled: VALID, hollow: INVALID, star: peak", fontsize=8)
    figure.suptitle("PeakQPS: " + (f"peak {found.peak.target_qps:g} QPS" if found.peak else "no VALID point"))
    figure.tight_layout()
    path = directory / PNG_NAME
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _x(point: Point, tokens: bool) -> float | None:
    return point.tokens_per_second if tokens else point.completed_qps


def _plot_series(axis: Any, curve: list[Point], peak: Point | None, key: str, tokens: bool) -> None:
    pairs = [(_x(p, tokens), getattr(p, key), p) for p in curve]
    pairs = [(x, y, p) for x, y, p in pairs if x is not None and y is not None]
    plot = axis.plot
    plot([x for x, _, _ in pairs], [y / 1e6 for _, y, _ in pairs], color="0.6", linewidth=1)
    for x, y, point in pairs:
        valid = point.result_validity == "VALID"
        plot([x], [y / 1e6], marker="o", color="tab:blue" if valid else "tab:red",
             markerfacecolor="tab:blue" if valid else "none", linestyle="")
        if point is peak:
            plot([x], [y / 1e6], marker="*", markersize=14, color="gold", markeredgecolor="black", linestyle="")
