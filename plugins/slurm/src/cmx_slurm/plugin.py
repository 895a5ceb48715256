"""cmx-slurm's hook implementations (imported on every ``cmx`` command: keep it light)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cmx_core.api import ExecutionOutcome, ExecutionRequest, Executor, ExecutorSettings, hookimpl
from cmx_slurm.about import SUMMARY

if TYPE_CHECKING:
    from cmx_core.api import Plan



def _execute(request: ExecutionRequest) -> ExecutionOutcome:
    from cmx_slurm.executor import SlurmExecutor

    return SlurmExecutor().run(request)


def _check_plan(plan: Plan, settings: ExecutorSettings) -> None:
    from cmx_slurm.executor import SlurmExecutor

    SlurmExecutor().check_plan(plan, settings)


def _describe(plan: Plan, settings: ExecutorSettings) -> dict[str, Any]:
    from cmx_slurm.executor import SlurmExecutor

    return SlurmExecutor().describe(plan, settings)


def _run_many(requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
    from cmx_slurm.array import run_many

    return run_many(requests, max_parallel)


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    from cmx_slurm.settings import SlurmSettings

    register(Executor(name="slurm", summary=SUMMARY, run=_execute, settings=SlurmSettings,
                      check_plan=_check_plan, describe=_describe, run_many=_run_many,
                      injects=frozenset({"kill-worker"})))  # its kill_worker (docs/faults.md)
