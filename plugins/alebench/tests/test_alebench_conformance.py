"""cmx-core's conformance kit on cmx-alebench through its installed entry point, with the
``alebench.evaluate`` step judging the trivial solution on the public cases in the sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cmx_alebench.problem import shipped_solutions
from cmx_core.testing import PluginConformance, StepSample


class TestAlebenchConformance(PluginConformance):
    plugin = "alebench"
    step_samples: ClassVar[Mapping[str, StepSample]] = {
        "alebench.evaluate": StepSample(
            params={"problem": "cmx001", "code": str(shipped_solutions() / "trivial.py"), "language": "python",
                    "mode": "public", "judge": "sandbox"},
            expect_outputs=("overall_judge_result", "overall_absolute_score", "rank", "performance", "final_results"),
        ),
    }

    recipe_inputs: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "ale-bench-eval": {"problem": "cmx001", "code": str(shipped_solutions() / "trivial.py")},
    }

    @pytest.fixture(autouse=True)
    def _sandbox(self, sandbox_ready: None) -> None:
        return None

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        assert output.outputs["overall_judge_result"] == "ACCEPTED"
        assert output.result is not None
        assert output.result.sections["ale_bench"]["problems"][0]["problem_id"] == "cmx001"
        assert Path(output.outputs["final_results"]).is_file()
