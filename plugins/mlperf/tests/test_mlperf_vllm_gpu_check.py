"""plugins/mlperf/scripts/gpu_check.sh: valid bash, executable, bounded, and its plan check
(run here against the recorded 1xH200 facts) agrees with vllm_plan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cmx_mlperf.llm import vllm_plan

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "plugins" / "mlperf" / "scripts" / "gpu_check.sh"


def test_the_script_is_executable_valid_bash_and_bounded() -> None:
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)
    text = SCRIPT.read_text()
    assert "set -euo pipefail" in text
    runs = [line for line in text.splitlines() if '"${cmx[@]}" run' in line]
    assert runs and all(line.lstrip().startswith(("if timeout", "timeout")) for line in runs)


def test_plan_only_on_the_h200_facts_matches_the_planner(tmp_path: Path, cmx_home: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "CMX_PYTHON": sys.executable,
           "GPU_CHECK_FACTS": str(REPO / "examples" / "facts" / "h200-1x.json")}
    proc = subprocess.run(["bash", str(SCRIPT), "--plan-only"], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check = (tmp_path / "out" / "plan-check.txt").read_text()
    split = vllm_plan.choose(1, 150754820096, 0.0)
    launch = check.splitlines()[0].split()
    assert launch[1:3] == ["vllm", "serve"]
    assert launch[launch.index("--tensor-parallel-size") + 1] == str(split.tensor_parallel)
    assert launch[launch.index("--data-parallel-size") + 1] == str(split.data_parallel)
    assert "concurrency: 256" in check
    assert (tmp_path / "out" / "versions.txt").read_text().startswith("python ")
    assert "plan matches the planner" in proc.stderr
