"""CNN/DailyMail from a local path (cmx_mlperf.llm.cnndm, recipe get-dataset-cnn-dailymail):
verified by its sha256, counted, used by the accuracy run and named in its result; a file
whose checksum is not the reference's is refused for a reference run (docs/models.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_mlperf import targets
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm import cnndm
from cmx_mlperf.llm.dataset import SAMPLES


def _cnn_eval(directory: Path, count: int = 12, name: str = "cnn_eval.json") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    items = [{"instruction": "Summarize the article.", "input": s.article, "output": s.reference}
             for s in SAMPLES[:count]]
    path = directory / name
    path.write_text(json.dumps(items))
    return path


def test_a_local_cnn_eval_is_loaded_counted_and_hashed(tmp_path: Path) -> None:
    import hashlib

    path = _cnn_eval(tmp_path)
    dataset = cnndm.load(path)
    assert len(dataset.samples) == 12 and dataset.samples[0].reference == SAMPLES[0].reference
    assert dataset.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert dataset.name == targets.BENCHMARKS["llama3_1-8b"].dataset  # named like the reference...
    assert cnndm.verify(dataset, reference=False)["verdict"] == targets.NAMED_LIKE  # ...not verified
    assert cnndm.load(_cnn_eval(tmp_path / "b", 3, "mine.json")).name == "local mine.json"


def test_a_checksum_that_differs_is_refused_for_a_reference_run(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    dataset = cnndm.load(_cnn_eval(tmp_path))
    with pytest.raises(UsageError, match=r"refused for a reference run: sha256 \w+ is not a known digest"):
        cnndm.verify(dataset, reference=True)
    bench = dataclasses.replace(targets.BENCHMARKS["llama3_1-8b"], dataset_digests=frozenset({dataset.sha256}))
    monkeypatch.setitem(targets.BENCHMARKS, "llama3_1-8b", bench)
    assert cnndm.verify(dataset, reference=True)["verdict"] == targets.REFERENCE
    edited = cnndm.load(_cnn_eval(tmp_path / "edited", 11))  # one sample short: another checksum
    with pytest.raises(UsageError, match="refused for a reference run"):
        cnndm.verify(edited, reference=True)


@pytest.mark.parametrize(("text", "problem"), [("[]", "non-empty JSON list"), ("{", "not JSON"),
                                               ('[{"input": "a"}]', "sample 0 has no string")])
def test_bad_files_are_one_usage_error(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "cnn_eval.json").write_text(text)
    with pytest.raises(UsageError, match=problem):
        cnndm.load(tmp_path / "cnn_eval.json")
    with pytest.raises(UsageError, match="not a file"):
        cnndm.load(tmp_path / "missing.json")


def _cmx(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "CMX_HOME": str(home)})


def test_the_recipe_reports_the_count_and_refuses_a_reference_run(cmx_home: Path, tmp_path: Path) -> None:
    path = _cnn_eval(tmp_path)
    ok = _cmx(["run", "recipe", "--tags=get,dataset,cnn-dailymail", f"--path={path}"], cmx_home)
    assert ok.returncode == 0, ok.stderr
    result = Path(ok.stdout.strip().splitlines()[-1].removeprefix("result: "))
    outputs = json.loads(result.read_text())["outputs"]
    assert outputs["samples"] == 12 and outputs["verdict"] == targets.NAMED_LIKE and len(outputs["sha256"]) == 64
    refused = _cmx(["run", "recipe", "--tags=get,dataset,cnn-dailymail", f"--path={path}", "--reference=true"],
                   cmx_home)
    assert refused.returncode == 2 and "refused for a reference run" in refused.stderr
    assert len([line for line in refused.stderr.splitlines() if "error" in line]) == 1


def test_the_llama_plan_takes_the_dataset_dependency(cmx_home: Path, tmp_path: Path) -> None:
    from cmx_core.testing.runs import plan_view

    path = _cnn_eval(tmp_path)
    plan = plan_view("mlperf,inference,llama", {"dataset_path": str(path), "dataset_reference": True}).to_json()
    node = next(n for n in plan["nodes"] if n["recipe"] == "get-dataset-cnn-dailymail")
    assert node["inputs"] == {"path": str(path), "reference": True}
    root = next(n for n in plan["nodes"] if n["recipe"] == "mlperf-inference-llama")
    params = root["steps"][0]["rendered"]["sut_params"]
    assert params["dataset_path"] == "<deps.dataset.path>" and params["total_sample_count"] == "<deps.dataset.samples>"


def test_the_accuracy_run_uses_the_dataset_and_the_result_names_it(tiny_llama: Path, cmx_home: Path,
                                                                    cmx_step_context: Any, tmp_path: Path) -> None:
    path = _cnn_eval(tmp_path, 6)
    params = {"sut": "hf-llm", "sut_params": {"model_dir": str(tiny_llama), "max_new_tokens": 4, "batch_size": 6,
                                              "total_sample_count": 6, "dataset_path": str(path)},
              "scenario": "Offline", "mode": "AccuracyOnly", "model_name": "llama3.1-8b",
              "min_query_count": 1, "timeout_s": 300}
    mlperf = run_step(cmx_step_context(params=params)).result.sections["mlperf"]
    dataset = mlperf["identity"]["dataset"]
    assert dataset["name"] == targets.BENCHMARKS["llama3_1-8b"].dataset
    assert dataset["digest"] == cnndm.load(path).sha256 and dataset["verdict"] == targets.NAMED_LIKE
    assert any("dataset is named like the reference" in b and "not verified" in b
               for b in mlperf["submission_blockers"])
    assert any("6 samples; the reference dataset has 13368" in b for b in mlperf["submission_blockers"])
    assert mlperf["accuracy"]["gen_len"] > 0


def test_both_llm_suts_read_their_prompts_and_references_from_the_file(tmp_path: Path) -> None:
    from cmx_mlperf.llm.hf_sut import HfLlmConfig, HfLlmSUT
    from cmx_mlperf.llm.http_sut import OpenAIHttpConfig, OpenAIHttpSUT

    path = _cnn_eval(tmp_path, 5)
    for sut in (HfLlmSUT(HfLlmConfig(model_dir=str(tmp_path), dataset_path=str(path))),
                OpenAIHttpSUT(OpenAIHttpConfig(dataset_path=str(path)))):
        assert sut._samples == cnndm.load(path).samples and sut.dataset_info["samples"] == 5
    assert HfLlmSUT(HfLlmConfig(model_dir=str(tmp_path))).dataset_info["name"] == "cmx-llm-summaries"


def test_docs_models_md_describes_the_dataset_recipe_and_inputs() -> None:
    root = Path(__file__).resolve().parents[3]
    doc = (root / "docs" / "models.md").read_text()
    llama = (root / "plugins/mlperf/src/cmx_mlperf/recipes/llama.yaml").read_text()
    recipe = (root / "plugins/mlperf/src/cmx_mlperf/recipes/get-dataset-cnn-dailymail.yaml").read_text()
    assert "tags: [get, dataset, cnn-dailymail]" in recipe and "--tags=get,dataset,cnn-dailymail" in doc
    for name in ("dataset_path", "dataset_reference"):
        assert f"  {name}: " in llama and f"--{name}=" in doc
    for output in ("path", "name", "sha256", "samples", "verdict"):
        assert f"  {output}: " in recipe and f"`{output}`" in doc
    assert "refused for a reference run" in doc and "local NAME" in doc
