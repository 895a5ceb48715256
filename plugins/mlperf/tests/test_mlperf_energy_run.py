"""Energy and cost of real LoadGen runs (the noop SUT in a child process, as every run).

On this machine no power source exists (no NVIDIA or AMD GPU, no readable RAPL), so the
energy fields are null with the reason; on a machine with one the same tests check that the
fields are filled and the series was written.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import Registry, validate_document
from cmx_core.testing.registry import load_registry
from cmx_core.testing.results import H100_FACTS, example_document
from cmx_core.testing.telemetry import SERIES_FILE, open_source
from cmx_mlperf.harness.child import REPORT
from cmx_mlperf.harness.step import run_step

TOKENS = {"model_name": "llama3.1-8b", "sut_params": {"tokens_per_sample": 8, "total_sample_count": 64}}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Registry:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "mlperf")
    loaded = load_registry()
    assert loaded.plugins["mlperf"].error is None, loaded.plugins["mlperf"].error
    return loaded


def _run(make_ctx: Any, **params: Any) -> Any:
    params.setdefault("sut", "noop")
    return run_step(make_ctx(params=params))


def _machine_has_power() -> bool:
    source, _ = open_source()
    if source is not None:
        source.close()
    return source is not None


def _check_energy(cost: dict[str, Any], log_dir: Path) -> None:
    """Null with the reason here; filled (and the series written) where a source exists."""
    if _machine_has_power():
        assert cost["source"] in ("nvml", "amd-smi", "rapl") and cost["energy_j"] is not None
        assert cost["avg_power_w"] == pytest.approx(cost["energy_j"] / cost["duration_s"])
        assert (log_dir / SERIES_FILE).is_file()
        return
    assert cost["source"] == "none" and cost["energy_j"] is None and cost["avg_power_w"] is None
    assert cost["energy_reason"].startswith("no power source: NVML: ")
    assert "; amd-smi: " in cost["energy_reason"] and "; RAPL: " in cost["energy_reason"]
    assert not (log_dir / SERIES_FILE).exists()


def test_a_token_run_reports_cost_per_million_tokens_and_energy_or_why_not(
        cmx_home: Path, cmx_step_context: Any, registry: Registry, tmp_path: Path) -> None:
    out = _run(cmx_step_context, scenario="Server", duration_s=0.5, target_qps=500, price_per_hour=2.5, **TOKENS)
    part = out.result
    cost = part.sections["cost"]
    tokens_per_s = part.metrics["tokens_per_second"].value
    assert cost["price_per_hour_usd"] == 2.5
    assert cost["throughput"] == {"metric": "tokens_per_second", "value": tokens_per_s, "unit": "tokens/s"}
    assert cost["cost_per_million_tokens_usd"] == pytest.approx(2.5 / (tokens_per_s * 3600) * 1e6)
    metric = part.metrics["cost_per_million_tokens_usd"]
    assert metric.value == cost["cost_per_million_tokens_usd"] and metric.unit == "USD/1M tokens"
    assert metric.higher_is_better is False
    log_dir = Path(out.outputs["log_dir"])
    _check_energy(cost, log_dir)
    if cost["energy_j"] is None:
        assert cost["tokens_per_joule"] is None and cost["tokens_per_joule_reason"] == cost["energy_reason"]
        assert "energy_j" not in part.metrics and "tokens_per_joule" not in part.metrics
    report = json.loads((log_dir / REPORT).read_text())
    assert report["energy"]["energy_reason"] == cost.get("energy_reason")
    document = copy.deepcopy(example_document(tmp_path, part=part, facts=H100_FACTS))
    assert document["cost"] == cost
    validate_document(document, source="result.json", suites=registry.suites)


def test_a_vision_run_without_a_price_has_per_sample_figures_and_reasons(
        cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="Offline", duration_s=0.5, min_query_count=100)
    cost = out.result.sections["cost"]
    assert cost["throughput"]["metric"] == "samples_per_second"
    assert cost["price_per_hour_usd"] is None and cost["cost_per_million_tokens_usd"] is None
    assert cost["cost_reason"] == "no price given (--price-per-hour)"
    assert "cost_per_million_tokens_usd" not in out.result.metrics
    assert "samples_per_joule" in cost and "tokens_per_joule" not in cost
    _check_energy(cost, Path(out.outputs["log_dir"]))


def test_power_sample_ms_0_switches_sampling_off(cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="Offline", duration_s=0.5, min_query_count=100, power_sample_ms=0)
    cost = out.result.sections["cost"]
    assert cost["energy_j"] is None and cost["energy_reason"] == "power sampling is off (power_sample_ms: 0)"
    assert not (Path(out.outputs["log_dir"]) / SERIES_FILE).exists()
