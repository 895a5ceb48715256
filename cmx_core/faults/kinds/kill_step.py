"""``kill-step``: SIGKILL to the step's process group ``@2s`` after it started, or ``@50%``
once the step reported ``progress`` >= 0.5 on its metrics channel (default ``@0s``)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from typing import TYPE_CHECKING

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.providers.recovery import FaultKind, Injection

if TYPE_CHECKING:
    import subprocess

KIND = FaultKind("kill-step")
POLL_S = 0.02
_TIME = re.compile(r"^(\d+(?:\.\d+)?)s?$")
_PROGRESS = re.compile(r"^(\d+(?:\.\d+)?)%$")


class KillStep(StepInjector):
    kind = KIND

    def parse(self, text: str, when: str) -> Injection:
        progress, seconds = _PROGRESS.match(when), _TIME.match(when or "0")
        if progress is not None and 0 < float(progress.group(1)) <= 100:
            return Injection(KIND, at_progress=float(progress.group(1)) / 100, text=text)
        if seconds is not None:
            return Injection(KIND, after_s=float(seconds.group(1)), text=text)
        raise UsageError(f"--inject {text!r}: use kill-step@SECONDS (kill-step@2s) or kill-step@PERCENT "
                         "(kill-step@50%)")

    def started(self, injection: Injection, proc: subprocess.Popen[bytes], strike: Strike) -> None:
        thread = threading.Thread(target=_kill_when, args=(proc, injection, strike), daemon=True, name="cmx-inject")
        thread.start()
        strike.on_cleanup(thread.join)


def _kill_when(proc: subprocess.Popen[bytes], injection: Injection, strike: Strike) -> None:
    began = time.monotonic()
    while not strike.stopping.is_set() and proc.poll() is None:
        if (injection.after_s is not None and time.monotonic() - began >= injection.after_s) or \
                (injection.at_progress is not None and strike.progress() >= injection.at_progress):
            strike.fire()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        strike.stopping.wait(POLL_S)


INJECTOR = KillStep()
