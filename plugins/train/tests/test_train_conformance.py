"""cmx-core's conformance kit on cmx-train through its installed entry point: hookimpls,
cmx-core range, provider metadata, light import, every recipe validates and plans, and the
``train.run`` step on a 2-rank torchrun sample whose result part makes a schema-valid
document (the kit builds it and validates it, the ``train`` section against the plugin's own
schema)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from cmx_core.testing import PluginConformance, StepSample


class TestTrainConformance(PluginConformance):
    plugin = "train"
    step_samples: ClassVar[Mapping[str, StepSample]] = {
        "train.run": StepSample(params={"mode": "throughput", "nproc": 2, "batch_size": 32, "steps": 3,
                                        "warmup_steps": 1, "timeout_s": 120},
                                expect_outputs=("samples_per_second", "world_size", "status")),
    }

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        part = output.result
        assert part is not None and part.status == "valid"
        assert part.benchmark["suite"] == "train" and part.benchmark["division"] == "unofficial"
        assert part.metrics["samples_per_second"].value > 0
        assert part.metrics["samples_per_second"].unit == "samples/s"
        assert part.metrics["samples_per_second"].higher_is_better is True
        assert part.metrics["step_time_p99_ms"].higher_is_better is False
        section = part.sections["train"]
        assert [r["rank"] for r in section["ranks"]] == [0, 1]
        assert section["world_size"] == 2 and section["launcher"] == "torchrun"

