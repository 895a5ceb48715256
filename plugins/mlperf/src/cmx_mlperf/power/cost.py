"""The result's ``cost`` section and its metrics, from the child's energy report.

* ``cost_per_million_tokens_usd = price_per_hour / (tokens_per_second * 3600) * 1e6``, as
  FlexBoard computes it: it needs only the price and LoadGen's throughput, no power source.
* ``tokens_per_joule = tokens_per_second / avg_power_w`` (LoadGen's throughput and the mean
  power over the same test window).
* A run without tokens (a vision model) gets ``samples_per_joule`` and
  ``cost_per_million_samples_usd`` instead, and ``cost_per_million_tokens_usd`` null.

Every null field has a one-line reason beside it (``energy_reason``, ``cost_reason``,
``tokens_per_joule_reason``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cmx_core.api import Metric

#: Throughput metrics, by preference: LoadGen's tokens/s, then its sample or query rate.
_RATES = (("tokens_per_second", "tokens"), ("samples_per_second", "samples"),
          ("completed_samples_per_second", "samples"), ("queries_per_second", "samples"))


@dataclass(frozen=True)
class Throughput:
    name: str  # the metric it comes from
    per_second: float
    unit: str  # tokens or samples


def throughput(metrics: Mapping[str, Metric]) -> Throughput | None:
    """LoadGen's throughput: tokens/s where the run counts tokens, else samples/s."""
    for name, unit in _RATES:
        metric = metrics.get(name)
        if metric is not None and isinstance(metric.value, (int, float)) and metric.value > 0:
            return Throughput(name, float(metric.value), unit)
    return None


def cost_per_million(price_per_hour: float, per_second: float) -> float:
    """USD per million tokens (or samples) at ``per_second`` for ``price_per_hour`` USD."""
    return price_per_hour / (per_second * 3600.0) * 1e6


def _energy_fields(energy: Mapping[str, Any] | None) -> dict[str, Any]:
    if not isinstance(energy, Mapping):
        return {"energy_j": None, "avg_power_w": None, "source": "none",
                "energy_reason": "the LoadGen child reported no energy"}
    out = {k: v for k, v in energy.items() if v is not None or k in ("energy_j", "avg_power_w")}
    out.setdefault("source", "none")
    return out


def cost_section(energy: Mapping[str, Any] | None, price_per_hour: float | None,
                 metrics: Mapping[str, Metric]) -> tuple[dict[str, Any], dict[str, Metric]]:
    """The ``cost`` section and the metrics it adds (only values that were measured)."""
    section = _energy_fields(energy)
    rate = throughput(metrics)
    unit = rate.unit if rate else "tokens"
    per_joule = f"{unit}_per_joule"
    section[per_joule] = None
    if rate is not None:
        section["throughput"] = {"metric": rate.name, "value": rate.per_second, "unit": f"{rate.unit}/s"}
    avg = section.get("avg_power_w")
    if rate is not None and isinstance(avg, (int, float)) and avg > 0:
        section[per_joule] = rate.per_second / avg
    else:
        section[f"{per_joule}_reason"] = _per_joule_reason(rate, avg, section.get("energy_reason"))
    section["price_per_hour_usd"] = price_per_hour
    section["cost_per_million_tokens_usd"] = None
    if price_per_hour is None:
        section["cost_reason"] = "no price given (--price-per-hour)"
    elif rate is None:
        section["cost_reason"] = "no throughput measured"
    else:
        section[f"cost_per_million_{unit}_usd"] = cost_per_million(price_per_hour, rate.per_second)
        if unit != "tokens":
            section["cost_reason"] = "cost_per_million_tokens_usd: the run counts samples, not tokens"
    return section, _metrics(section, unit)


def _per_joule_reason(rate: Throughput | None, avg: Any, energy_reason: Any) -> str:
    if rate is None:
        return "no throughput measured"
    if isinstance(avg, (int, float)):
        return f"average power is {avg} W"
    return str(energy_reason or "no average power")


def _metrics(section: Mapping[str, Any], unit: str) -> dict[str, Metric]:
    wanted = (("energy_j", "J", False), ("avg_power_w", "W", False),
              (f"{unit}_per_joule", f"{unit}/J", True),
              (f"cost_per_million_{unit}_usd", f"USD/1M {unit}", False))
    return {name: Metric(float(section[name]), metric_unit, higher) for name, metric_unit, higher in wanted
            if isinstance(section.get(name), (int, float))}
