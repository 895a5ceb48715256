"""The main job (``mlperf,inference,llama`` on the CPU, what ``scripts/benchmark.sh`` runs) VALID
under ``--container``: in the template its needs call for (cpu-torch: torch and transformers),
a short Offline run whose expected QPS the LoadGen step calibrates and, when a run ends too
early, corrects and runs again, exactly as on the host (every attempt recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def test_the_main_job_is_valid_in_its_container(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("cmx_mlperf", reason="cmx-mlperf (plugins/mlperf) provides mlperf,inference,llama")
    proc = subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=mlperf,inference,llama",
                           "--scenario=Offline", "--duration_s=2", "--container", "--json"],
                          capture_output=True, text=True, timeout=3000, env=dict(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    mlperf = doc["mlperf"]
    attempts = mlperf.get("attempts", [{"result_validity": mlperf["result_validity"]}])
    assert mlperf["result_validity"] == "VALID" and attempts[-1]["result_validity"] == "VALID", attempts
    assert doc["status"] == "valid" and doc["benchmark"]["scenario"] == "Offline"
    assert doc["metrics"]["tokens_per_second"]["value"] > 0
    container = doc["system"]["container"]
    assert container["image"].startswith("cmx-cpu-torch:") and len(container["content_digest"]) == 64
    assert container["limits"]["pids"] == 4096 and container["limits"]["shm_bytes"] == 2 * 1024 ** 3
    assert doc["software"]["packages"].get("torch", "").startswith("2.13.0")  # detected inside the image
