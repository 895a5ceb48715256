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
from collections.abc import Callable
from pathlib import Path

from cmx_core.api import StepContext, StepOutput, StepType, Suite, hookimpl
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


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
