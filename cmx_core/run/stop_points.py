"""Named points of a run's start-up where a test may stop cmx, to kill it there from outside.

With ``CMX_STOP_AT=NAME`` set, :func:`fault_point` sends ``SIGSTOP`` to cmx itself when the
run reaches the point ``NAME`` (``marked``, ``run-dir``, ``plan-written``, ``lock-written``):
the test sees the process stopped (``/proc/PID/stat`` state ``T``), then sends ``SIGKILL``
by PID. So a kill lands exactly between two writes of the start-up, on any machine, however
busy, instead of at a moment a sleep guessed (``tests/test_hostile_input_iii.py``).
Without the variable each point is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

STOP_ENV = "CMX_STOP_AT"
POINTS = ("marked", "run-dir", "plan-written", "lock-written")


def fault_point(name: str) -> None:
    """Stop this process here when ``CMX_STOP_AT`` names ``name``."""
    if os.environ.get(STOP_ENV) == name:
        os.kill(os.getpid(), signal.SIGSTOP)
