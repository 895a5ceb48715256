"""``partition``: the step runs in a new network namespace with no route (``unshare --net``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.providers.recovery import FaultKind, Injection

KIND = FaultKind("partition")


class Partition(StepInjector):
    kind = KIND

    def check(self, injection: Injection, executor: str) -> None:
        if shutil.which("unshare") is None:
            raise UsageError(f"--inject {injection.text}: needs `unshare` on PATH")

    def prefix(self, injection: Injection, cwd: Path, strike: Strike) -> list[str]:
        strike.fire()
        return ["unshare", "--net", "--"]


INJECTOR = Partition()
