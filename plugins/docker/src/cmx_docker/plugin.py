"""cmx-docker's hook implementations (imported on every ``cmx`` command: keep it light)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.api import (
    Capabilities,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    Executor,
    SandboxBackend,
    StepContext,
    StepType,
    hookimpl,
)
from cmx_docker.settings import DockerSettings
from cmx_docker.steps import BASE_PARAMS, BUILD_PARAMS, base_step, build_step

_DOCKER = Capabilities(needs_docker=True)


def _build(ctx: StepContext) -> Any:
    return build_step(ctx)


def _base(ctx: StepContext) -> Any:
    return base_step(ctx)


def _execute(request: ExecutionRequest) -> ExecutionOutcome:
    from cmx_docker.executor import DockerExecutor  # deferred: start-up: pulls packaging, psutil (150 modules)

    return DockerExecutor().run(request)


def _check_plan(context: ExecutionContext) -> None:
    from cmx_docker.executor import DockerExecutor  # deferred: start-up: pulls packaging, psutil (150 modules)

    DockerExecutor().check_plan(context)


def _describe(context: ExecutionContext) -> dict[str, Any]:
    from cmx_docker.executor import DockerExecutor  # deferred: start-up: pulls packaging, psutil (150 modules)

    return DockerExecutor().describe(context)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="docker.build", summary="Build (or reuse) an image from a container template",
                      run=_build, params=BUILD_PARAMS, capabilities=_DOCKER))
    register(StepType(name="docker.base", summary="Import a registry-free Debian base image (debootstrap)",
                      run=_base, params=BASE_PARAMS,
                      capabilities=Capabilities(needs_docker=True, needs_root=True, needs_network=True)))


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(Executor(name="docker", summary="Build the recipe's image if needed and run the plan inside it",
                      run=_execute, settings=DockerSettings, check_plan=_check_plan, describe=_describe,
                      capabilities=_DOCKER, runs_here=True))


def _sandbox() -> Any:
    from cmx_docker.sandbox import DockerSandbox  # deferred: start-up: pulls packaging (39 modules)

    return DockerSandbox()


@hookimpl
def cmx_register_sandboxes(register: Callable[[SandboxBackend], None]) -> None:
    register(SandboxBackend(name="docker", summary="a container per run: no network, read-only root, limits, GPUs",
                            create=_sandbox))


@hookimpl
def cmx_prune_resources(referenced: frozenset[str], dry_run: bool) -> list[str]:
    from cmx_docker.prune import prune_images  # deferred: start-up: pulls packaging (37 modules)

    return prune_images(referenced, dry_run)


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
