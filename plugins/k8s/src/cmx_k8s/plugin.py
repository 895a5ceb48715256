"""cmx-k8s's hook implementations (imported on every ``cmx`` command: the kubernetes
client is imported only when a k8s plan or run needs it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cmx_core.api import (
    KILL_WORKER,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    Executor,
    hookimpl,
)
from cmx_k8s.settings import K8sSettings

SUMMARY = "Run the plan as a Kubernetes Job (GPUs as resource limits, nodeSelector on the GPU product)"


def _execute(request: ExecutionRequest) -> ExecutionOutcome:
    # deferred: start-up: pulls packaging, yaml… (179 modules)
    from cmx_k8s.executor import K8sExecutor

    return K8sExecutor().run(request)


def _run_many(requests: Sequence[ExecutionRequest], jobs: int) -> tuple[ExecutionOutcome, ...]:
    # deferred: start-up: pulls packaging, yaml… (180 modules)
    from cmx_k8s.sweep import run_many

    return run_many(requests, jobs)


def _run_each(requests: Sequence[ExecutionRequest], jobs: int,
              on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    # deferred: start-up: pulls packaging, yaml… (180 modules)
    from cmx_k8s.sweep import run_each

    run_each(requests, jobs, on_outcome)


def _render_many(contexts: Sequence[ExecutionContext], jobs: int) -> list[Path]:
    # deferred: start-up: pulls packaging, yaml… (180 modules)
    from cmx_k8s.sweep import render_many

    return render_many(contexts, jobs)


def _check_plan(context: ExecutionContext) -> None:
    # deferred: start-up: pulls packaging, yaml… (179 modules)
    from cmx_k8s.executor import K8sExecutor

    K8sExecutor().check_plan(context)


def _describe(context: ExecutionContext) -> dict[str, Any]:
    # deferred: start-up: pulls packaging, yaml… (179 modules)
    from cmx_k8s.executor import K8sExecutor

    return K8sExecutor().describe(context)


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(Executor(name="k8s", summary=SUMMARY, run=_execute, settings=K8sSettings,
                      check_plan=_check_plan, describe=_describe, run_many=_run_many,
                      run_each=_run_each, render_many=_render_many,
                      injects=frozenset({KILL_WORKER})))  # its kill_worker (docs/faults.md)
