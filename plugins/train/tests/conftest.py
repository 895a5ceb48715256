"""Helpers: ``cmx(...)`` runs the real CLI with a private CMX_HOME and a time bound;
``train(...)`` runs the ``train.run`` step in-process through a StepContext (with the
registered launchers, as the engine hands them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# every multi-process test is bounded: a launch that hangs is killed by its own timeout_s,
# and the CLI call around it by this one
CLI_TIMEOUT_S = 240


def run_cmx(home: Path, *args: str, timeout: float = CLI_TIMEOUT_S,
            **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home), "CMX_TRAIN_THREADS": "1", **extra_env}
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def document(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def two_nodes_trained(result: Any) -> Any:
    """The ``train`` section of a valid ``nodes.2`` run's result, checked to hold a rank on
    each node that trained."""
    section = result["train"]
    assert result["status"] == "valid" and section["nodes"] == 2 and section["world_size"] == 2
    assert sorted(r["rank"] for r in section["ranks"]) == [0, 1]
    assert all(r["samples"] > 0 for r in section["ranks"])
    return section


@pytest.fixture
def cli(home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cli(*args)``: the real ``cmx`` with the module's private CMX_HOME."""

    def call(*args: str, timeout: float = CLI_TIMEOUT_S, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return run_cmx(home, *args, timeout=timeout, **extra_env)

    return call


@pytest.fixture
def as_json() -> Callable[[subprocess.CompletedProcess[str]], Any]:
    return document


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cmx-home")


@pytest.fixture(scope="session")
def curve(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    """``curve(nproc=, seed=, launcher=)``: the ``train`` section of a 12-step throughput run
    at global batch 64, run once per session for each argument set and shared by the tests
    that compare loss curves (each comparison still runs both sides for real)."""
    from cmx_core.testing import make_step_context

    done: dict[tuple[int, int, str], dict[str, Any]] = {}

    def run(nproc: int = 1, seed: int = 0, launcher: str = "torchrun") -> dict[str, Any]:
        from cmx_train.step import run_step

        key = (nproc, seed, launcher)
        if key not in done:
            params = {"mode": "throughput", "batch_size": 64, "steps": 12, "warmup_steps": 0, "nproc": nproc,
                      "seed": seed, "launcher": launcher, "timeout_s": 120}
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("CMX_TRAIN_THREADS", "1")
                context = make_step_context(tmp_path_factory.mktemp("curve"), params=params)
                done[key] = dict(run_step(context).result.sections["train"])
        return done[key]

    return run


@pytest.fixture
def train(cmx_step_context: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Run the step with these params (one torch thread a rank: the box is small and shared)."""
    monkeypatch.setenv("CMX_TRAIN_THREADS", "1")

    def run(**params: Any) -> Any:
        from cmx_train.step import run_step

        params.setdefault("timeout_s", 120)
        return run_step(cmx_step_context(params=params))

    return run
