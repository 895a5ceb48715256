"""cmx's conformance kit run against cmx-textstats through its installed entry point."""

from pathlib import Path

from cmx_core.testing import PluginConformance, StepSample


class TestTextstatsConformance(PluginConformance):
    plugin = "textstats"

    def step_sample(self, step: str, tmp_path: Path) -> StepSample | None:
        if step != "textstats.count":
            return None
        sample = tmp_path / "sample.txt"
        sample.write_text("one two\nthree\n", encoding="utf-8")
        return StepSample(params={"path": str(sample)}, expect_outputs=("lines", "words", "bytes"))

    def check_step_output(self, step, output, sample):
        assert (output.outputs["lines"], output.outputs["words"], output.outputs["bytes"]) == (
            2, 3, 14)
        assert output.result is not None
        assert output.result.metrics["words"].value == 3
