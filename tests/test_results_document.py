"""build_document: facts -> system/software (partial facts never crash), status, metrics,
artifacts with sha256, JSON-safe outputs."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cmx_core.errors import ResultsError
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import validate_document
from cmx_core.results.document import json_safe, utc_timestamp
from cmx_core.results.examples import (
    A100_MIG_FACTS,
    H100_FACTS,
    MI300X_FACTS,
    MINIMAL_FACTS,
    example_document,
    mlperf_part,
)


def test_plain_run_is_completed_custom_benchmark(tmp_path: Path) -> None:
    doc = example_document(tmp_path)
    validate_document(doc)
    assert doc["status"] == "completed"
    assert doc["metrics"] == {} and doc["invalid_reasons"] == []
    assert doc["benchmark"]["suite"] == "custom"
    assert doc["benchmark"]["task"] == "detect-os"
    assert doc["benchmark"]["suite_version"] == "1.0"
    assert doc["benchmark"]["primary_metric"] is None
    assert doc["timing"] == {"started_at": "2026-11-30T07:00:00.000Z",
                             "finished_at": "2026-11-30T07:00:01.500Z", "wall_s": 1.5}
    assert doc["provenance"]["query"] == {"tags": ["detect", "os"], "inputs": {}, "variations": {}}
    assert doc["provenance"]["recipes"][0]["digest"] == "sha256:" + "ab" * 32
    assert doc["software"]["recipe"] == {"name": "detect-os", "tags": ["detect", "os"], "version": "1.0"}


def test_minimal_facts_fill_system(tmp_path: Path) -> None:
    system = example_document(tmp_path, facts=MINIMAL_FACTS)["system"]
    assert system["cpu"] == {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) CPU @ 2.20GHz",
                             "core_count": 1, "count_per_node": 1, "vcpu_count": 2, "frequency_mhz": 2200.0}
    assert system["memory"] == {"capacity_bytes": 8_335_265_792}
    assert system["os"]["kernel"] == "6.1.0-28-cloud-amd64"
    assert system["accelerator"] is None and system["container"] is None
    assert system["number_of_nodes"] == 1


def test_h100_facts_fill_accelerator_and_software(tmp_path: Path) -> None:
    doc = example_document(tmp_path, facts=H100_FACTS, part=mlperf_part())
    validate_document(doc)
    assert doc["system"]["accelerator"] == {
        "vendor": "NVIDIA", "name": "NVIDIA H100 80GB HBM3", "tag": "h100", "count_per_node": 8,
        "total_count": 8, "memory_capacity_bytes": 85_520_809_984, "driver_version": "550.54.15",
        "cuda_version": "12.4.1", "compute_capability": "9.0", "mig_profile": None, "interconnect": "nvlink",
    }
    assert doc["system"]["os"]["pretty_name"] == "Ubuntu 22.04.4 LTS"
    assert doc["software"]["packages"] == {"torch": "2.3.1+cu121"}
    assert doc["software"]["framework"] == "pytorch"
    assert doc["software"]["framework_version"] == "2.5.1"
    assert doc["mlperf"]["result_validity"] == "VALID"
    assert doc["model"]["number_of_parameters"] == 25_600_000


def test_mig_profiles_and_amd_gpus(tmp_path: Path) -> None:
    a100 = example_document(tmp_path, facts=A100_MIG_FACTS)["system"]["accelerator"]
    assert (a100["tag"], a100["mig_profile"], a100["cuda_version"]) == ("a100", "3g.40gb,2g.20gb,1g.10gb", "12.4.1")
    mi300x = example_document(tmp_path, facts=MI300X_FACTS)
    validate_document(mi300x)
    accel = mi300x["system"]["accelerator"]
    assert (accel["vendor"], accel["name"], accel["total_count"]) == ("AMD", "AMD Instinct MI300X", 8)
    assert (accel["cuda_version"], accel["mig_profile"], accel["compute_capability"]) == (None, None, "gfx942")
    assert mi300x["software"]["packages"] == {}


@pytest.mark.parametrize("facts", [
    {},
    {"os": None, "cpu": "weird", "memory": {"total_bytes": "lots"}},
    {"cpu": {"cores": True, "threads": -4, "frequency_mhz": float("nan"), "model": ["x"]}},
    {"gpus": {"devices": "none"}, "cuda": {"selected": None}},
    {"gpus": {"devices": [{"name": None}, 3]}, "host": {"type": "mainframe", "number_of_nodes": 0}},
    {"container": {"image": ""}, "torch": {"version": 2}},
], ids=["empty", "wrong-types", "bad-cpu", "no-devices", "odd-devices", "odd-container"])
def test_partial_or_broken_facts_become_null_never_crash(tmp_path: Path, facts: dict) -> None:
    doc = example_document(tmp_path, facts=facts)
    validate_document(doc)
    cpu = doc["system"]["cpu"]
    assert cpu["core_count"] is None and cpu["vcpu_count"] is None
    assert doc["system"]["type"] is None
    assert doc["system"]["number_of_nodes"] == 1


def test_odd_device_list_keeps_the_mapping_devices(tmp_path: Path) -> None:
    doc = example_document(tmp_path, facts={"gpus": {"devices": [{"name": None}, 3], "source": "rocm-smi"}})
    assert doc["system"]["accelerator"]["total_count"] == 1
    assert doc["system"]["accelerator"]["vendor"] == "AMD"


def test_mixed_gpus_count_the_first_model(tmp_path: Path) -> None:
    devices = [{"name": "NVIDIA L40S"}, {"name": "NVIDIA L40S"}, {"name": "NVIDIA T4"}]
    accel = example_document(tmp_path, facts={"gpus": {"devices": devices}})["system"]["accelerator"]
    assert (accel["name"], accel["count_per_node"], accel["total_count"]) == ("NVIDIA L40S", 2, 3)


def test_result_part_sets_status_metrics_and_sections(tmp_path: Path) -> None:
    part = ResultPart(
        status="invalid",
        benchmark={"suite": "mlperf-inference", "task": "resnet50", "scenario": "Server",
                   "primary_metric": "qps"},
        metrics={"qps": Metric(99.5, "queries/s", True), "latency_p99_ns": Metric(12, "ns", False)},
        invalid_reasons=("99th percentile latency 15 ms > target 10 ms",),
        sections={"mlperf": {"result_validity": "INVALID", "perf_constraints_met": False}},
        notes="server run",
    )
    doc = example_document(tmp_path, part=part)
    validate_document(doc)
    assert doc["status"] == "invalid"
    assert doc["invalid_reasons"] == ["99th percentile latency 15 ms > target 10 ms"]
    assert doc["metrics"]["qps"] == {"value": 99.5, "unit": "queries/s", "higher_is_better": True}
    assert doc["metrics"]["latency_p99_ns"]["higher_is_better"] is False
    assert doc["benchmark"]["scenario"] == "Server" and doc["benchmark"]["mode"] is None
    assert doc["notes"] == "server run"


def test_single_metric_becomes_primary(tmp_path: Path) -> None:
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t"},
                      metrics={"score": Metric(0.5, "score", True)})
    assert example_document(tmp_path, part=part)["benchmark"]["primary_metric"] == "score"


def test_error_wins_over_part_status_and_keeps_metrics(tmp_path: Path) -> None:
    doc = example_document(tmp_path, part=mlperf_part(), error=("accuracy step exited with 1", "acc", 2))
    validate_document(doc)
    assert doc["status"] == "error"
    assert doc["error"] == {"message": "accuracy step exited with 1", "node": "acc", "step": "2"}
    assert doc["metrics"]["samples_per_second"]["value"] == 1234.5


def test_nan_metric_becomes_null(tmp_path: Path) -> None:
    part = ResultPart(status="partial", benchmark={"suite": "custom", "task": "t"},
                      metrics={"x": Metric(float("nan"), "s", False)})
    doc = example_document(tmp_path, part=part)
    assert doc["metrics"]["x"]["value"] is None
    validate_document(doc)


def test_outputs_are_json_safe(tmp_path: Path) -> None:
    outputs = {"path": tmp_path / "model", "sizes": (1, 2), "tags": {"b", "a"}, "inf": math.inf,
               "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "nested": {1: Path("x")}}
    doc = example_document(tmp_path, outputs=outputs)
    assert doc["outputs"] == {"path": str(tmp_path / "model"), "sizes": [1, 2], "tags": ["a", "b"],
                              "inf": None, "when": "2026-01-02T03:04:05.000Z", "nested": {"1": "x"}}
    validate_document(doc)


def test_artifacts_get_sha256_size_and_relative_path(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    data = b"performance results\n" * 1000
    (tmp_path / "logs" / "summary.txt").write_bytes(data)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_bytes(b"x")
    try:
        doc = example_document(tmp_path, artifacts=(
            (tmp_path / "logs" / "summary.txt", "summary"), (Path("logs/summary.txt"), "again"),
            (outside, "log")))
    finally:
        outside.unlink()
    first, second, third = doc["artifacts"]
    assert first == {"path": "logs/summary.txt", "sha256": hashlib.sha256(data).hexdigest(),
                     "size_bytes": len(data), "kind": "summary"}
    assert second["path"] == "logs/summary.txt" and second["sha256"] == first["sha256"]
    assert third["path"] == outside.as_posix()
    validate_document(doc)


def test_missing_artifact_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"log_detail.txt: artifact of kind 'mlperf_log_detail' cannot be read"):
        example_document(tmp_path, artifacts=((Path("mlperf_log_detail.txt"), "mlperf_log_detail"),))


def test_engine_git_commit_is_a_sha_or_none(tmp_path: Path) -> None:
    commit = example_document(tmp_path)["software"]["engine"]["git_commit"]
    assert commit is None or (len(commit) == 40 and int(commit, 16) >= 0)


def test_the_commit_is_read_in_a_checkout_and_in_its_linked_worktree(tmp_path: Path) -> None:
    """A linked worktree's ``.git`` is a file naming its own folder, whose HEAD names a branch
    kept in the repository's common folder: both read the same commit git itself reports."""
    import os
    import subprocess

    from cmx_core.results.gitinfo import _read_git_commit

    def git(*args: str, cwd: Path) -> str:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path), "PATH": os.environ["PATH"]}
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True)
        return done.stdout.strip()

    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a")
    git("add", "a.txt", cwd=repo)
    git("commit", "-q", "-m", "one", cwd=repo)
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"), cwd=repo)
    (tmp_path / "wt" / "b.txt").write_text("b")
    git("add", "b.txt", cwd=tmp_path / "wt")
    git("commit", "-q", "-m", "two", cwd=tmp_path / "wt")
    assert _read_git_commit(str(repo / ".git")) == git("rev-parse", "HEAD", cwd=repo)
    assert _read_git_commit(str(tmp_path / "wt" / ".git")) == git("rev-parse", "HEAD", cwd=tmp_path / "wt")
    git("pack-refs", "--all", cwd=repo)  # the branches move to packed-refs in the common folder
    assert _read_git_commit(str(tmp_path / "wt" / ".git")) == git("rev-parse", "HEAD", cwd=tmp_path / "wt")


def test_utc_timestamp_converts_offsets() -> None:
    from datetime import timedelta

    moment = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert utc_timestamp(moment) == "2026-01-01T10:00:00.000Z"


def test_json_safe_unknown_objects_become_strings() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert json_safe({"a": Thing()}) == {"a": "thing"}
