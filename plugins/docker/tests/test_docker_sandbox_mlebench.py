"""An MLE-bench run through the docker sandbox, for real: ``cmx run --tags=mle-bench,run
--sandbox=docker`` prepares the competition, runs the baseline agent in a container of the
real engine with MLE-bench's paths and settings (``/home/data`` read-only, 4G of shared
memory, the CPU count asked for; no GPU request: this machine has none), grades it, and
writes the per-seed result and the aggregate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cmx_mlebench", reason="cmx-mlebench is not installed (scripts/install.sh installs it)")

BASELINE = "python /mlebench/baselines/baseline.py"


def _cmx(home: Path, image: str, *args: str) -> Any:
    env = {**os.environ, "CMX_HOME": str(home), "CMX_SANDBOX_IMAGE": image}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=900, check=False)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.fixture
def env_under_tmp() -> Iterator[str]:
    """An agent environment first on PATH that lives under /tmp, as a clone's venv does there:
    a venv seeing cmx's packages through a .pth file, then cmx's own environment and its base
    interpreter. The run must not depend on where the checkout lives (#36: this test failed
    from a clone under /tmp)."""
    root = Path(tempfile.mkdtemp(prefix="cmx-clone-", dir="/tmp"))
    try:
        yield _make_env(root / "checkout" / ".venv")
    finally:
        shutil.rmtree(root)


def _make_env(env: Path) -> str:
    subprocess.run([os.path.realpath(sys.base_prefix) + "/bin/python3", "-m", "venv", "--without-pip", str(env)],
                   check=True)
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "cmx-env.pth").write_text("".join(f"{p}\n" for p in sys.path if p.endswith("site-packages")))
    assert str(env).startswith("/tmp/"), env
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)]
    return ",".join(dict.fromkeys([str(env), *(p for p in prefixes if not p.startswith("/usr"))]))


def test_mle_bench_run_with_the_docker_sandbox(engine, base_image, tmp_path: Path,  # type: ignore[no-untyped-def]
                                               env_under_tmp: str) -> None:
    from cmx_docker.build import ensure_image

    image = ensure_image("python", endpoint=engine).tag
    home = tmp_path / "home"
    aggregate = _cmx(home, image, "run", "recipe", "--tags=mle-bench,run", "--sandbox=docker",
                     "--competition=sklearn-digits", f"--agent-cmd={BASELINE}", "--seeds=1", "--cpus=1", "--gpus=0",
                     f"--agent-env={env_under_tmp}")
    assert "mle_bench" in aggregate, aggregate.get("invalid_reasons")
    section = aggregate["mle_bench"]
    assert section["kind"] == "aggregate" and section["n"] == 1 and len(section["members"]) == 1
    member = _cmx(home, image, "results", "show", section["members"][0])
    assert "mle_bench" in member, (member.get("status"), member.get("invalid_reasons"), member.get("error"))
    report = member["mle_bench"]
    agent = report["agent"]
    assert agent["sandbox"] == "docker" and agent["verdict"] == "ok", agent
    assert {"network=none", "root=read-only", "cpus=nano-cpus"} <= set(agent["enforced"])
    assert agent["container"] == {"shm_size": "4G", "gpus": 0, "not_applied": []}
    assert report["valid_submission"] is True and report["score"] is not None
    assert report["leaderboard_source"] == "synthetic"
    assert section["mean"] == (100.0 if report["any_medal"] else 0.0)
