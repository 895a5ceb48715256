"""cmx hook implementations of cmx-train: the ``train.run`` step type, the ``train`` suite with
the schema of its ``train`` result section, and the recipes ``train,throughput``,
``train,time-to-accuracy`` and ``train,max-batch``, and the ``cmx train-k8s`` command.

Importing this module costs next to nothing: torch, the launchers and mlperf-logging are
imported only when a step runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from cmx_core.api import Command, StepContext, StepOutput, StepType, Suite, hookimpl
from cmx_train.config import PARAMS
from cmx_train.k8s_command import configure, run

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


def _k8s_configure(parser: argparse.ArgumentParser) -> None:
    configure(parser)


def _k8s_run(args: argparse.Namespace) -> int:
    return run(args)


@hookimpl
def cmx_register_commands(register: Callable[[Command], None]) -> None:
    register(Command(name="train-k8s",
                     summary="Render and validate the Kubernetes manifests of a multi-node training run",
                     configure=_k8s_configure, run=_k8s_run))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
