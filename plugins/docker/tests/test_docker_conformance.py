"""cmx-core's plugin conformance kit, run on cmx-docker (the step samples use the engine)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from cmx_core.testing import PluginConformance, StepSample


class TestDockerConformance(PluginConformance):
    plugin = "docker"
    step_samples = MappingProxyType({
        "docker.build": StepSample(params={"template": "python", "accelerator": "", "rebuild": False},
                                   expect_outputs=("image", "image_id", "digest", "runtime", "built")),
        "docker.base": StepSample(params={"suite": "bookworm"}, expect_outputs=("image", "image_id")),
    })

    def test_steps_run_on_samples(self, conformance_registry: Any, tmp_path: Path,  # type: ignore[override]
                                  engine: Any, base_image: Any) -> None:
        super().test_steps_run_on_samples(conformance_registry, tmp_path)

    def test_executors_run_the_demo_chain(self, conformance_registry: Any,  # type: ignore[override]
                                          monkeypatch: Any, engine: Any, base_image: Any) -> None:
        super().test_executors_run_the_demo_chain(conformance_registry, monkeypatch)

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        assert str(output.outputs["image_id"]).startswith("sha256:")
