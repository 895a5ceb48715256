"""The get-tiny-llama and mlperf-inference-llama recipes: plans for every device (GPU
variations against recorded facts files) and one short end-to-end CPU run through cmx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core import api
from cmx_core.errors import CmxError

REPO = Path(__file__).resolve().parents[3]
H100_FACTS = REPO / "examples" / "facts" / "h100-sxm-8x.json"


def _facts_file(tmp_path: Path, tag: str) -> Path:
    """A facts file as ``cmx detect --json`` writes it, reduced to what the plan reads."""
    path = tmp_path / f"{tag}.json"
    facts = {"accelerator": [tag], "os": {"name": "linux", "arch": "x86_64"},
             "gpus": {"devices": [{"index": 0, "name": f"NVIDIA {tag.upper()}", "accelerator_tag": tag}]}}
    path.write_text(json.dumps({"facts": facts}))
    return path


def _steps(node: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(s["id"], s["with"]) for s in node["steps"]]


def _node(plan: Any, recipe: str) -> dict[str, Any]:
    return next(n for n in plan.to_json()["nodes"] if n["recipe"] == recipe)


def test_cpu_is_the_default_with_the_tiny_model(cmx_home: Path) -> None:
    plan = api.plan("mlperf,inference,llama")
    root = _node(plan, "mlperf-inference-llama")
    assert root["variations"] == {"cpu": True} and plan.container is None
    assert [sid for sid, _ in _steps(root)] == ["hf"]
    (_, with_), = _steps(root)
    assert with_["sut"] == "hf-llm" and root["inputs"]["scenario"] == "Server"
    assert "model" in root["deps"]
    assert _node(plan, "get-tiny-llama")["inputs"]["hidden_size"] == 64


def test_h100_plans_with_recorded_facts(cmx_home: Path) -> None:
    assert H100_FACTS.is_file(), "examples/facts/h100-sxm-8x.json is part of the repository"
    plan = api.plan("mlperf,inference,llama,h100", {"model_path": "/models/llama-3.1-8b"}, facts_file=H100_FACTS)
    root = _node(plan, "mlperf-inference-llama")
    assert root["variations"] == {"h100": True} and root["requires"] == {"accelerator": "h100"}
    assert plan.container == "vllm" and root["deps"] == {}  # model_path given: no tiny model
    (sid, with_), = _steps(root)
    assert sid == "http" and with_["sut"] == "openai-http"
    assert with_["sut_params"]["launch"][:2] == ["vllm", "serve"]


@pytest.mark.parametrize("tag", ["h200", "a100"])
def test_other_gpus_plan_and_serve_the_tiny_model_by_default(cmx_home: Path, tmp_path: Path, tag: str) -> None:
    plan = api.plan(f"mlperf,inference,llama,{tag}", facts_file=_facts_file(tmp_path, tag))
    root = _node(plan, "mlperf-inference-llama")
    assert root["variations"] == {tag: True} and plan.container == "vllm"
    assert [sid for sid, _ in _steps(root)] == ["http"] and "model" in root["deps"]


def test_transformers_backend_on_a_gpu(cmx_home: Path, tmp_path: Path) -> None:
    plan = api.plan("mlperf,inference,llama,h200", {"backend": "transformers"},
                    facts_file=_facts_file(tmp_path, "h200"))
    (sid, with_), = _steps(_node(plan, "mlperf-inference-llama"))
    assert sid == "hf" and with_["sut"] == "hf-llm"


def test_gpu_variation_refused_on_a_machine_without_it(cmx_home: Path, tmp_path: Path) -> None:
    with pytest.raises(CmxError, match="h100"):
        api.plan("mlperf,inference,llama,h100", facts_file=_facts_file(tmp_path, "a100"))


def test_unknown_scenario_is_refused(cmx_home: Path) -> None:
    with pytest.raises(CmxError, match="scenario"):
        api.plan("mlperf,inference,llama", {"scenario": "Batch"})


def test_short_cpu_run_end_to_end(cmx_home: Path) -> None:
    inputs = {"duration_s": 1, "target_qps": 20, "min_query_count": 1, "max_new_tokens": 8, "timeout_s": 300}
    outcome = api.run("mlperf,inference,llama", inputs)
    doc = outcome.document
    assert doc["status"] in ("valid", "invalid")
    assert doc["benchmark"]["suite"] == "mlperf-inference" and doc["benchmark"]["scenario"] == "Server"
    assert doc["metrics"]["tokens_per_second"]["value"] > 0
    assert doc["metrics"]["ttft_p99_ns"]["value"] > 0 and doc["metrics"]["tpot_p99_ns"]["value"] > 0
    assert doc["model"]["architecture"] == "LlamaForCausalLM"
    assert doc["mlperf"]["sut"] == "hf-llm"


@pytest.mark.parametrize(("inputs", "key"), [
    ({}, "llama3.1-8b"),
    ({"scenario": "Offline"}, "llama3.1-8b"),
    ({"scenario": "SingleStream"}, "llama3.1-8b-edge"),  # only the edge benchmark has SingleStream
    ({"scenario": "Offline", "system_type": "edge"}, "llama3.1-8b-edge"),
    ({"scenario": "SingleStream", "system_type": "datacenter"}, "llama3.1-8b"),  # the export then refuses it
    ({"scenario": "Offline", "model_name": "llama3.1-8b-interactive"}, "llama3.1-8b-interactive"),
])
def test_an_edge_run_uses_the_edge_benchmark_key(cmx_home: Path, inputs: dict[str, str], key: str) -> None:
    """The embedded mlperf.conf holds the edge benchmark's own settings (5000 samples): an edge
    run under the datacenter key would log settings the checker's edge benchmark rejects."""
    from cmx_core.testing.runs import engine

    view = engine.plan_view("mlperf,inference,llama", inputs)
    assert view.steps["mlperf-inference-llama"]["hf"]["model_name"] == key
