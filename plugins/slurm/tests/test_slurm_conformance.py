"""cmx-core's plugin conformance kit, run on cmx-slurm (the demo chain on the real Slurm)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from cmx_core.testing import PluginConformance, executor_problems
from cmx_slurm.testing import Cluster


class TestSlurmConformance(PluginConformance):
    plugin = "slurm"
    executor_options = MappingProxyType({"slurm": MappingProxyType({"poll_s": "0.2"})})

    def test_executors_run_the_demo_chain(self, conformance_registry: Any,  # type: ignore[override]
                                          monkeypatch: Any, slurm: Cluster) -> None:
        super().test_executors_run_the_demo_chain(conformance_registry, monkeypatch)

    def test_executor_settings_pass_the_kit(self, conformance_registry: Any) -> None:
        assert executor_problems(conformance_registry, "slurm") == []
