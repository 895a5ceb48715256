"""cmx-core's conformance kit run on cmx-mlperf through its installed entry point: hookimpls
against the hookspecs, the cmx-core range, provider metadata, every recipe validates and uses
known step types, light import, and the ``mlperf.loadgen`` step on a sample input (the
``noop`` SUT, Offline, min_duration 1 s) whose result makes a schema-valid document, its
``mlperf`` section checked by the plugin's own section schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from cmx_core.testing import PluginConformance, StepSample


class TestMlperfConformance(PluginConformance):
    plugin = "mlperf"
    step_samples: ClassVar[Mapping[str, StepSample]] = {
        "mlperf.loadgen": StepSample(
            params={"sut": "noop", "scenario": "Offline", "duration_s": 1, "min_query_count": 10},
            expect_outputs=("status", "result", "units", "log_dir", "primary_metric",
                            "samples_per_second", "latency_p99_ns"),
        ),
    }

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        part = output.result
        assert part is not None
        assert part.benchmark["suite"] == "mlperf-inference"
        assert part.benchmark["scenario"] == "Offline" and part.benchmark["division"] == "unofficial"
        assert part.status == "valid", part.invalid_reasons  # calibrated Offline: LoadGen says VALID
        assert part.metrics["samples_per_second"].value > 0
        mlperf = part.sections["mlperf"]
        assert mlperf["effective"]["min_duration_ms"] == 1000
        assert mlperf["log_dir"] and mlperf["sut_errors"] == [] and mlperf["failed_samples"] is None
        assert {a.kind for a in output.artifacts} >= {"mlperf_log_detail", "mlperf_log_summary"}
        _validate_with_the_plugins_suite(part)


def _validate_with_the_plugins_suite(part: Any) -> None:
    """The real harness's section passes the plugin's own section schema."""
    import tempfile
    from pathlib import Path

    from cmx_core.api import validate_document
    from cmx_core.testing.registry import load_registry
    from cmx_core.testing.results import example_document

    with tempfile.TemporaryDirectory() as run_dir:
        document = example_document(Path(run_dir), part=part)
    validate_document(document, source="loadgen result", suites=load_registry().suites)
