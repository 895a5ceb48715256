"""cmx-core's conformance kit run on cmx-mlperf: entry point, hookimpls, provider metadata,
recipes, light import, and the mlperf.loadgen step on a sample (no-op SUT, 0.3 s)."""

from __future__ import annotations

from typing import Any

from cmx_core.testing import PluginConformance, StepSample


class TestMlperfConformance(PluginConformance):
    plugin = "mlperf"
    step_samples = {
        "mlperf.loadgen": StepSample(
            params={"sut": "noop", "scenario": "Offline", "duration_s": 0.3, "min_query_count": 10},
            expect_outputs=("status", "result", "units", "log_dir", "samples_per_second"),
        ),
    }

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        assert output.result is not None
        assert output.result.benchmark["suite"] == "mlperf-inference"
        assert output.result.sections["mlperf"]["log_dir"]
