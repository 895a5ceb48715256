"""``disk-full``: a size-limited tmpfs (``@64K``, default 64 KiB) mounted over the step's work
directory (bubblewrap, a private mount namespace)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.faults.when import parse_size
from cmx_core.providers.recovery import FaultKind, Injection

KIND = FaultKind("disk-full")
DEFAULT_LIMIT = 64 << 10


class DiskFull(StepInjector):
    kind = KIND

    def parse(self, text: str, when: str) -> Injection:
        return Injection(KIND, limit_bytes=parse_size(text, when, DEFAULT_LIMIT), text=text)

    def check(self, injection: Injection, executor: str) -> None:
        if shutil.which("bwrap") is None:
            raise UsageError(f"--inject {injection.text}: needs `bwrap` on PATH")

    def prefix(self, injection: Injection, cwd: Path, strike: Strike) -> list[str]:
        strike.fire()
        return ["bwrap", "--dev-bind", "/", "/", "--size", str(injection.limit_bytes), "--tmpfs", str(cwd),
                "--chdir", str(cwd), "--die-with-parent", "--"]


INJECTOR = DiskFull()
