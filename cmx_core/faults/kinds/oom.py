"""``oom``: a memory cgroup limit below the step's need (``@64M``, default 64 MiB): the
kernel's OOM killer ends it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.faults.when import parse_size
from cmx_core.providers.recovery import FaultKind, Injection

if TYPE_CHECKING:
    import subprocess

KIND = FaultKind("oom")
DEFAULT_LIMIT = 64 << 20


class Oom(StepInjector):
    kind = KIND

    def parse(self, text: str, when: str) -> Injection:
        return Injection(KIND, limit_bytes=parse_size(text, when, DEFAULT_LIMIT), text=text)

    def started(self, injection: Injection, proc: subprocess.Popen[bytes], strike: Strike) -> None:
        # deferred: the engine imports the injectors on every run; bubblewrap pulls filelock
        from cmx_core.sandbox.bubblewrap import make_groups

        groups = make_groups(("memory",))
        if not groups.set_memory(injection.limit_bytes or DEFAULT_LIMIT) or groups.add(proc.pid):
            groups.remove()
            raise UsageError("--inject oom: cannot make a memory cgroup here (needs root, or a delegated cgroup)")
        strike.fire()
        strike.on_cleanup(lambda: (groups.kill_all(), groups.remove()))


INJECTOR = Oom()
