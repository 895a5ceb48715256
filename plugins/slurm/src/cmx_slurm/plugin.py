"""cmx-slurm's hook implementations (imported on every ``cmx`` command: keep it light)."""

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
from cmx_slurm.about import SUMMARY
from cmx_slurm.settings import SlurmSettings


def _execute(request: ExecutionRequest) -> ExecutionOutcome:
    from cmx_slurm.executor import SlurmExecutor  # deferred: start-up: 14 modules not needed to start cmx

    return SlurmExecutor().run(request)


def _check_plan(context: ExecutionContext) -> None:
    from cmx_slurm.executor import SlurmExecutor  # deferred: start-up: 14 modules not needed to start cmx

    SlurmExecutor().check_plan(context)


def _describe(context: ExecutionContext) -> dict[str, Any]:
    from cmx_slurm.executor import SlurmExecutor  # deferred: start-up: 14 modules not needed to start cmx

    return SlurmExecutor().describe(context)


def _run_many(requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
    from cmx_slurm.array import run_many  # deferred: start-up: 15 modules not needed to start cmx

    return run_many(requests, max_parallel)


def _run_each(requests: Sequence[ExecutionRequest], max_parallel: int,
              on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    from cmx_slurm.array import run_each  # deferred: start-up: 15 modules not needed to start cmx

    run_each(requests, max_parallel, on_outcome)


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(Executor(name="slurm", summary=SUMMARY, run=_execute, settings=SlurmSettings,
                      check_plan=_check_plan, describe=_describe, run_many=_run_many,
                      run_each=_run_each, batch_retries=True,  # an array's lost tasks resubmitted (array.py)
                      adopts=True,  # a killed sweep's array tasks waited for on --resume (array.py)
                      injects=frozenset({KILL_WORKER})))  # its kill_worker (docs/faults.md)
