"""The trade-off a serving benchmark is about (issue 53 item 2): throughput against a latency
percentile, and against energy where it was recorded, with the Pareto front marked: the runs
no other run beats on both (more throughput at no more latency or energy). Drawn when at
least two runs record both figures; every value comes from a result document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.results.compare import axes_of, config_label, config_of

PERCENTILE = "p99"
"""The latency percentile of ``mlperf.latency_ns`` the front is drawn against."""


@dataclass(frozen=True)
class TradePoint:
    cost: float
    throughput: float
    label: str
    run_id: str


@dataclass(frozen=True)
class TradeOff:
    """Throughput (y, higher better) against a cost (x, lower better), and which points are
    on the front."""

    title: str
    xlabel: str
    ylabel: str
    points: tuple[TradePoint, ...]

    def to_json(self) -> dict[str, Any]:
        on_front = {p.run_id for p in self.front}
        return {"title": self.title, "x": self.xlabel, "y": self.ylabel,
                "points": [{**p.__dict__, "on_front": p.run_id in on_front} for p in self.points]}

    @property
    def front(self) -> tuple[TradePoint, ...]:
        """The points no other point dominates, by rising cost."""
        best: list[TradePoint] = []
        for point in sorted(self.points, key=lambda p: (p.cost, -p.throughput)):
            if not best or point.throughput > best[-1].throughput:
                best.append(point)
        return tuple(best)


def trade_offs(documents: Sequence[Mapping[str, Any]]) -> list[TradeOff]:
    """Throughput against p99 latency and against energy, where two runs or more have both."""
    axes = axes_of([config_of(d) for d in documents])
    found = []
    for cost_name, xlabel, cost_of in (
            (f"{PERCENTILE} latency", f"{PERCENTILE} latency (ms)", _latency_ms),
            ("energy", "energy (J)", _energy_j)):
        drawn = [(d, p) for d in documents if (p := _point(d, cost_of, axes)) is not None]
        if len(drawn) >= 2:
            name, ylabel = _throughput(drawn[0][0]) or ("throughput", "")  # a run on the plot names its axis
            found.append(TradeOff(f"{name} against {cost_name} (Pareto front marked)", xlabel, ylabel,
                                  tuple(p for _, p in drawn)))
    return found


def _point(document: Mapping[str, Any], cost_of: Any, axes: Sequence[str]) -> TradePoint | None:
    throughput, cost = _throughput(document), cost_of(document)
    if throughput is None or cost is None:
        return None
    config = config_of(document)
    label = config_label(config, axes) or document["run_id"][:8]
    return TradePoint(cost, float(document["metrics"][throughput[0]]["value"]), label, document["run_id"])


def _throughput(document: Mapping[str, Any]) -> tuple[str, str] | None:
    """The run's throughput metric (name, unit): the primary one if it is a rate, else the
    first rate that is higher-better."""
    metrics = document.get("metrics") or {}
    primary = (document.get("benchmark") or {}).get("primary_metric")
    names = [primary, *metrics] if primary in metrics else list(metrics)
    for name in names:
        metric = metrics[name]
        if metric.get("higher_is_better") and metric.get("value") is not None and str(metric["unit"]).endswith("/s"):
            return str(name), str(metric["unit"])
    return None


def _latency_ms(document: Mapping[str, Any]) -> float | None:
    value = ((document.get("mlperf") or {}).get("latency_ns") or {}).get(PERCENTILE)
    return float(value) / 1e6 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _energy_j(document: Mapping[str, Any]) -> float | None:
    for metric in (document.get("metrics") or {}).values():
        if str(metric.get("unit")) == "J" and isinstance(metric.get("value"), (int, float)):
            return float(metric["value"])
    return None
