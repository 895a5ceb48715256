"""A test executor written only against the documented contract (docs/plugins.md,
"Executors"): a RemoteExecutor whose far side is a local child process running cmx."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from cmx_core.api import (
    ExecutionRequest,
    Executor,
    ExecutorSettings,
    Fetched,
    JobStatus,
    RemoteExecutor,
    RemoteJob,
    hookimpl,
)


@dataclass(frozen=True)
class SubprocessSettings(ExecutorSettings):
    timeout_s: float | None = field(default=None, metadata={"help": "kill the child after this many seconds"})


@dataclass(frozen=True)
class Child:
    process: subprocess.Popen[bytes]
    timeout_s: float | None


class SubprocessExecutor(RemoteExecutor[Child]):
    name = "subprocess"
    summary = "Run the plan in a child process (a test executor)"
    settings = SubprocessSettings

    def cmx_command(self, request: ExecutionRequest) -> tuple[str, ...]:
        return (sys.executable, "-m", "cmx_core")

    def submit(self, job: RemoteJob) -> Child:
        assert isinstance(job.request.context.settings, SubprocessSettings)
        with open(job.stage_dir / "job.log", "wb") as log:  # the child keeps its own descriptor
            process = subprocess.Popen(list(job.command), env={**os.environ, **job.env},
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        return Child(process, job.request.context.settings.timeout_s)

    def wait(self, handle: Child) -> JobStatus:
        try:
            code = handle.process.wait(timeout=handle.timeout_s)
        except subprocess.TimeoutExpired:
            self.cancel(handle)
            return JobStatus("timeout", None, f"killed after {handle.timeout_s:g} s")
        return JobStatus("completed" if code == 0 else "failed", code)

    def fetch(self, handle: Child, job: RemoteJob) -> Fetched:
        return Fetched(logs=(job.stage_dir / "job.log",))  # same file system: nothing to copy

    def cancel(self, handle: Child) -> None:
        handle.process.kill()
        handle.process.wait()


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(SubprocessExecutor().executor())
