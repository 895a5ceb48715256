"""``oom``: a memory cgroup limit below the step's need (``@64M``, default 64 MiB), set on
the step process's own group (:mod:`cmx_core.sandbox.step_group`): the kernel's OOM killer
ends it, and that group's count of OOM kills types the failure ``oom``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.faults.when import parse_size
from cmx_core.providers.recovery import FaultKind, Injection
from cmx_core.sandbox.step_group import group_of

if TYPE_CHECKING:
    import subprocess

KIND = FaultKind("oom")
DEFAULT_LIMIT = 64 << 20


class Oom(StepInjector):
    kind = KIND

    def parse(self, text: str, when: str) -> Injection:
        return Injection(KIND, limit_bytes=parse_size(text, when, DEFAULT_LIMIT), text=text)

    def started(self, injection: Injection, proc: subprocess.Popen[bytes], strike: Strike) -> None:
        # the limit goes on the step process's own group, whose OOM kills type the failure
        group = group_of(proc.pid)
        if group is None or not group.set_memory(injection.limit_bytes or DEFAULT_LIMIT):
            raise UsageError("--inject oom: cannot make a memory cgroup here (needs root, or a delegated cgroup)")
        strike.fire()


INJECTOR = Oom()
