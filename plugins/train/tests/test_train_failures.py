"""A wrong configuration fails in one line within a bounded time, never a hang: a world size
the launcher did not start, a rendezvous nobody else joins, an unreachable rendezvous, a
launch past its timeout; bad inputs exit 2 naming the key."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import StepFailed, UsageError
from cmx_core.testing import processes_with
from cmx_train.config import parse
from cmx_train.launch import free_port


def _env_rank(monkeypatch: pytest.MonkeyPatch, rank: int, world: int, port: int) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))


def test_world_size_mismatch_is_one_line(train: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _env_rank(monkeypatch, 0, 1, free_port())
    with pytest.raises(StepFailed) as err:
        train(launcher="env", nproc=2, batch_size=32, steps=2)
    message = str(err.value)
    assert "\n" not in message
    assert "world size mismatch: the launcher started 1 ranks, the run needs nproc x nodes = 2" in message


@pytest.mark.parametrize("rank", [0, 1], ids=["peer-never-comes", "unreachable"])
def test_rendezvous_failure_is_bounded(train: Any, monkeypatch: pytest.MonkeyPatch, rank: int) -> None:
    # rank 0 alone waits for a peer that never starts; rank 1 dials a port nobody listens on
    _env_rank(monkeypatch, rank, 2, free_port())
    began = time.monotonic()
    with pytest.raises(StepFailed) as err:
        train(launcher="env", nproc=2, batch_size=32, steps=2, rdzv_timeout_s=3, timeout_s=90)
    assert time.monotonic() - began < 90  # the launch's own limit was not what ended it
    message = str(err.value)
    assert "\n" not in message and f"rank {rank}: RuntimeError: rendezvous at 127.0.0.1:" in message
    assert "within 3 s" in message


def test_a_launch_past_its_timeout_is_killed_with_every_rank(train: Any, tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as err:
        train(mode="throughput", nproc=2, batch_size=32, steps=100000, timeout_s=5)
    assert "ran past timeout_s 5 s and was killed" in str(err.value)
    # torchrun's ranks run in sessions of their own: none may train on (they name this test's files)
    deadline = time.monotonic() + 30
    while processes_with(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(str(tmp_path)) == []


@pytest.mark.parametrize(("params", "key"), [
    ({"nproc": 2, "batch_size": 7}, "batch_size 7 is not divisible by the 2 ranks"),
    ({"precision": "fp8"}, "precision must be one of fp32, bf16, fp16, got 'fp8'"),
    ({"steps": 0}, "steps must be at least 1, got 0"),
    ({"nproc": "two"}, "nproc must be int, got 'two'"),
    ({"backend": "nccl"}, "backend nccl needs device cuda"),
    ({"launcher": "none", "nproc": 2, "batch_size": 2}, "launcher none starts one process"),
    ({"weights": "/nonexistent.pt"}, "weights '/nonexistent.pt' is not a file"),
    ({"target_accuracy": 1.5}, "target_accuracy must be in (0, 1]"),
    ({"colour": "red"}, "unknown parameter 'colour'"),
])
def test_bad_parameters_name_the_key(params: dict[str, Any], key: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(params)
    assert key in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("args", "key"), [
    (("--nproc=2", "--batch-size=7"), "batch_size 7 is not divisible"),
    (("--precision=fp8",), "precision"),
    (("--steps=0",), "steps"),
    (("--launcher=slurm",), "launcher"),
])
def test_bad_inputs_exit_2_in_one_line(cli: Any, args: tuple[str, ...], key: str) -> None:
    proc = cli("run", "recipe", "--tags=train,throughput", *args)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cmx: error:")]
    assert len(errors) == 1 and key in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_max_batch_on_the_cpu_needs_a_budget(cli: Any) -> None:
    proc = cli("run", "recipe", "--tags=train,max-batch", "--memory-limit-mb=0")
    assert proc.returncode == 2 and "memory_limit_mb" in proc.stderr, proc.stderr


def test_a_failed_run_records_an_error_result(cli: Any, as_json: Any) -> None:
    proc = cli("run", "recipe", "--tags=train,throughput", "--nproc=2", "--batch-size=32",
                   "--steps=100000", "--timeout-s=3", "--json")
    assert proc.returncode == 1
    answer = as_json(proc)
    assert "ran past timeout_s 3 s and was killed" in answer["error"]
    recorded = json.loads(Path(answer["result_path"]).read_text())
    assert recorded["status"] == "error"
