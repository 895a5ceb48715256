"""Training that survives a lost rank (#45 item 4): with ``checkpoint_every`` rank 0 saves the
model, optimiser and step into the step's checkpoint directory, and a run that finds one
resumes from it. Rank 1 of a 2-process torchrun training is killed by PID once the first
checkpoint is saved: under ``max_restarts=1`` torchrun restarts both ranks and they resume
(one attempt, ``restarts: 1``); under ``--retries 1 --retry-on killed`` the attempt is
recorded killed with rank 1 named, and the retry resumes.

The order is made by the test, not by speed: rank 0 is held (SIGSTOP) while rank 1 is killed,
so the run cannot end between the checkpoint seen and the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import validate_document

from .test_train_lost_rank import _rank_pid

LIMIT_S = 300
EVERY = 20


def _run(home: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CMX_HOME": str(home), "CMX_TRAIN_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=train,throughput",
                             "--nproc=2", "--batch-size=32", "--steps=600", "--warmup-steps=0",
                             f"--checkpoint-every={EVERY}", f"--timeout-s={LIMIT_S - 60}", "--json",
                             "--no-telemetry", *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _kill_rank_1_after_a_checkpoint(home: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + LIMIT_S - 60
    while time.monotonic() < deadline and proc.poll() is None:
        ranks = (_rank_pid(home, 0), _rank_pid(home, 1))
        if ranks[0] is not None and ranks[1] is not None and list(home.glob("data/runs/*/checkpoints/**/train.pt")):
            os.kill(ranks[0], signal.SIGSTOP)  # no step more until rank 1 is gone
            os.kill(ranks[1], signal.SIGKILL)
            os.kill(ranks[0], signal.SIGCONT)
            return ranks[1]
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint with both ranks running before cmx ended (exit {proc.poll()})")


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


def _document(out: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(out)
    validate_document(document)
    return document


@pytest.mark.parametrize("how", ["max-restarts", "retry"])
def test_a_killed_rank_resumes_from_the_last_checkpoint(tmp_path: Path, how: str) -> None:
    home = tmp_path / "home"
    extra = ("--max-restarts=1",) if how == "max-restarts" else ("--retries=1", "--retry-on=killed")
    proc = _run(home, *extra)
    victim = _kill_rank_1_after_a_checkpoint(home, proc)
    out, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    document = _document(out)
    section = document["train"]
    assert document["status"] == "valid" and section["checkpoint_every"] == EVERY
    assert section["resumed_from_step"] >= EVERY and section["resumed_from_step"] % EVERY == 0
    assert sum(r["samples"] for r in section["ranks"]) == (600 - section["resumed_from_step"]) * 32  # the rest
    if how == "max-restarts":
        assert section["restarts"] == 1 and document.get("attempts", []) == []
    else:
        assert section["restarts"] == 0
        lost, again = document["attempts"][0], document["attempts"][1]
        assert lost["fault"] == "killed" and f"rank 1 (pid {victim}) was killed by signal 9" in lost["message"]
        assert again["fault"] is None and again["resumed"] is True


def test_checkpoint_every_outside_throughput_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=train,throughput",
                           "--launcher=mpirun", "--max-restarts=1", "--json"], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert proc.returncode == 2 and "max_restarts needs launcher torchrun" in proc.stderr
    assert "Traceback" not in proc.stderr
