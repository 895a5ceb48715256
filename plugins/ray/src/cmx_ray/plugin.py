"""cmx-ray's hook implementations (imported on every ``cmx`` command: Ray is imported only
when a ray run or plan needs it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cmx_core.api import (
    KILL_WORKER,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    Executor,
    hookimpl,
)
from cmx_ray.settings import RaySettings

SUMMARY = "Run the plan as a Ray task (num_cpus, num_gpus, accelerator_type) on a cluster or a private one"


def _execute(request: ExecutionRequest) -> ExecutionOutcome:
    from cmx_ray.executor import RayExecutor  # deferred: start-up: 55 modules not needed to start cmx

    return RayExecutor().run(request)


def _check_plan(context: ExecutionContext) -> None:
    from cmx_ray.executor import RayExecutor  # deferred: start-up: 55 modules not needed to start cmx

    RayExecutor().check_plan(context)


def _describe(context: ExecutionContext) -> dict[str, Any]:
    from cmx_ray.executor import RayExecutor  # deferred: start-up: 55 modules not needed to start cmx

    return RayExecutor().describe(context)


def _run_many(requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
    from cmx_ray.batch import run_many  # deferred: start-up: 56 modules not needed to start cmx

    return run_many(requests, max_parallel)


def _run_each(requests: Sequence[ExecutionRequest], max_parallel: int,
              on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    from cmx_ray.batch import run_each  # deferred: start-up: 56 modules not needed to start cmx

    run_each(requests, max_parallel, on_outcome)


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(Executor(name="ray", summary=SUMMARY, run=_execute, settings=RaySettings,
                      check_plan=_check_plan, describe=_describe, run_many=_run_many,
                      run_each=_run_each, injects=frozenset({KILL_WORKER})))  # cmx_ray.worker
