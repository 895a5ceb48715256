"""cmx's conformance kit run against cmx-textstats through its installed entry point."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.testing import PluginConformance, StepSample


class TestTextstatsConformance(PluginConformance):
    plugin = "textstats"

    def step_sample(self, step: str, tmp_path: Path) -> StepSample | None:
        sample = tmp_path / "sample.txt"
        sample.write_text("one two\nthree two\n", encoding="utf-8")
        if step == "textstats.count":
            return StepSample(params={"path": str(sample)}, expect_outputs=("lines", "words", "bytes"))
        if step == "textstats.top":
            return StepSample(params={"path": str(sample), "n": 1}, expect_outputs=("top",))
        return None

    def check_step_output(self, step, output, sample):
        if step == "textstats.top":
            assert output.outputs["top"] == [{"word": "two", "count": 2}]
            return
        assert (output.outputs["lines"], output.outputs["words"], output.outputs["bytes"]) == (2, 4, 18)
        assert output.result is not None
        assert output.result.metrics["words"].value == 4

    def recipe_sample(self, recipe: str, tmp_path: Path) -> Mapping[str, Any]:
        text = tmp_path / "plan.txt"
        text.write_text("a b a\n", encoding="utf-8")
        return {"path": str(text)}
