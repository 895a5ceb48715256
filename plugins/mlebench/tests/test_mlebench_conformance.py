"""cmx-core's conformance kit on cmx-mlebench through its entry point: hookimpls, the
cmx-core range, provider metadata, every recipe valid with known step types, light import,
and the prepare and grade steps on samples whose result parts make schema-valid documents."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cmx_core.testing import PluginConformance, StepSample


class TestMlebenchConformance(PluginConformance):
    plugin = "mlebench"
    step_samples: ClassVar[Mapping[str, StepSample]] = {
        "mlebench.prepare": StepSample(params={"competition": "sklearn-diabetes"},
                                       expect_outputs=("competition", "public_dir", "checksums")),
    }
    recipe_inputs: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "mle-bench-all": {"agent_cmd": "python3 /home/agent/solve.py"},
        "mle-bench-lite": {"agent_cmd": "python3 /home/agent/solve.py"},
        "mle-bench-attempt": {"competition": "sklearn-digits", "agent_cmd": "python3 /home/agent/solve.py"},
        "mle-bench-run": {"competition": "sklearn-digits", "agent_cmd": "python3 /home/agent/solve.py"},
        "mle-bench-grade": {"competition": "sklearn-digits", "submission": "submission.csv"},
        "mle-bench-prepare": {"competition": "sklearn-digits"},
    }
    unsampled_steps: ClassVar[Mapping[str, str]] = {
        "mlebench.grade": "needs a prepared competition dep: test_mlebench_cli grades through cmx run",
        "mlebench.attempt": "needs a prepared dep and the sandbox: test_mlebench_sandbox and test_mlebench_cli",
        "mlebench.seeds": "runs cmx itself per seed: test_mlebench_cli runs three seeds",
    }

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        outputs = output.outputs
        assert outputs["leaderboard_source"] == "synthetic" and outputs["prepared_as"] == "built"
        assert Path(outputs["answers"]).is_file() and Path(outputs["checksums"]).is_file()
