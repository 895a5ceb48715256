"""cmx hook implementations of cmx-train: the ``train.run`` step type, the ``train`` suite with
the schema of its ``train`` result section, and the recipes ``train,throughput``,
``train,time-to-accuracy`` and ``train,max-batch``. A multi-node run on Kubernetes is
``cmx run ... --executor k8s --executor-opt nodes=N`` (cmx-k8s renders it; the step's launcher,
``torchrun``, is cmx-core's).

Importing this module costs next to nothing: torch, the launchers and mlperf-logging are
imported only when a step runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import Exporter, StepContext, StepOutput, StepType, Suite, hookimpl
from cmx_train.config import PARAMS

SECTION_SCHEMA = Path(__file__).parent / "schemas" / "train.schema.json"


def _run(ctx: StepContext) -> StepOutput:
    from cmx_train.step import run_step  # deferred: start-up: pulls numpy, pynvml, torch… (1003 modules)

    return run_step(ctx)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="train.run",
                      summary="Data-parallel training: throughput, time to accuracy or the largest batch that fits",
                      run=_run, params=PARAMS, measures=True,
                      examples=({"mode": "throughput", "nproc": 2, "batch_size": 64, "steps": 5},)))


@hookimpl
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    register(Suite(name="train", summary="Training: samples/s, scaling efficiency, time to accuracy, largest batch",
                   section="train", schema=json.loads(SECTION_SCHEMA.read_text(encoding="utf-8")),
                   required_for=("valid", "invalid")))


def _export(docs: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
    from cmx_train.export import export  # deferred: mlperf-logging only when this runs

    export(docs, run_dirs, dest)


@hookimpl
def cmx_register_exporters(register: Callable[[Exporter], None]) -> None:
    register(Exporter(name="mlperf-training",
                      summary="MLPerf Training submission tree (systems/, results/<system>/<benchmark>/result_N.txt)",
                      export=_export))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
