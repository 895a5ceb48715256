"""From how a run ended to a typed verdict with one line of reason (a pure function)."""

from __future__ import annotations

import os
import signal as signals
from dataclasses import dataclass

from cmx_core.sandbox.result import Verdict
from cmx_core.sandbox.spec import Limits


@dataclass(frozen=True)
class Ending:
    """The facts a verdict is made of.

    ``stop``: why the parent stopped waiting (``exited``; ``wall``, ``cpu`` or ``output``
    when it killed the run). ``status``: the wait status of the sandbox's outer process;
    bubblewrap exits with the program's code, or 128 + N when signal N ended the program
    (as a shell reports it), ``memory`` when the RSS watchdog stopped it. ``oom_kills``: the
    memory cgroup's count. ``big_file``: a file
    in the work dir reached the file-size bound (a program that blocked SIGXFSZ, which it
    cannot ignore under the sandbox's seccomp filter, sees EFBIG and goes on). ``setup_error``: bubblewrap's own
    message when it could not build the sandbox.
    """

    stop: str
    status: int
    oom_kills: int = 0
    cpu_s: float = 0.0
    big_file: bool = False
    setup_error: str | None = None
    watched_peak: int | None = None
    """The run's peak resident memory where a watchdog (not a cgroup) bounds it, else None."""
    forks_refused: int = 0
    """How many forks the process limit refused (``max`` in the pids group's ``pids.events``)."""
    work_full: bool = False
    """The work dir's size-bounded file system was full at some point of the run."""


def _name(sig: int) -> str:
    try:
        return signals.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def decide(ending: Ending, limits: Limits) -> tuple[Verdict, int | None, int | None, str]:
    """(verdict, exit_code, signal, reason) for a run that ended as ``ending`` says."""
    over = _watched_over(ending, limits)  # first: a cgroup would have killed the run when it passed
    if over is not None:
        return over
    if ending.stop == "wall":
        return Verdict.TIME_LIMIT, None, signals.SIGKILL, f"wall-time limit of {limits.wall_s:g} s reached; killed"
    if ending.stop == "cpu":
        return Verdict.TIME_LIMIT, None, signals.SIGKILL, f"CPU-time limit of {limits.cpu_s:g} s reached; killed"
    if ending.stop == "output":
        return (Verdict.OUTPUT_LIMIT, None, signals.SIGKILL,
                f"output passed the {limits.output_bytes} byte cap; killed")
    if ending.oom_kills:
        return (Verdict.MEMORY_LIMIT, None, signals.SIGKILL,
                f"memory limit of {limits.memory_bytes} bytes reached; the kernel killed {ending.oom_kills} "
                "process(es)")
    if os.WIFSIGNALED(ending.status):  # the sandbox itself was killed from outside
        sig = os.WTERMSIG(ending.status)
        return Verdict.KILLED, None, sig, f"the sandbox was killed by {_name(sig)}"
    code = os.WEXITSTATUS(ending.status)
    if 128 < code <= 128 + 64:
        return _by_signal(code - 128, ending, limits)
    if ending.setup_error:
        return Verdict.ERROR, code, None, f"the sandbox could not start the program: {ending.setup_error}"
    caught = _caught_limit(ending, limits, code)  # the program met a limit and went on (or exited 0)
    if caught is not None:
        return caught
    if code == 0:
        return Verdict.OK, 0, None, "exited with 0"
    return Verdict.ERROR, code, None, f"exited with {code}"


def _watched_over(ending: Ending, limits: Limits) -> tuple[Verdict, int | None, int | None, str] | None:
    """The memory verdict of a run whose watchdog (no cgroup) saw, or whose rusage shows, a
    resident peak past the limit. It comes before the wall, CPU and output stops: the peak was
    reached before whatever ended the run, and a memory cgroup would have killed it then (the
    watchdog's own tick can come late on a loaded machine, after the deadline's)."""
    if ending.stop == "memory":
        return (Verdict.MEMORY_LIMIT, None, signals.SIGKILL,
                f"memory limit of {limits.memory_bytes} bytes reached: the run's processes held "
                f"{ending.watched_peak} bytes resident; killed")
    peak, bound = ending.watched_peak, limits.memory_bytes
    if peak is None or bound is None or peak <= bound:
        return None
    code = os.WEXITSTATUS(ending.status) if ending.stop == "exited" and os.WIFEXITED(ending.status) else None
    stopped = "" if ending.stop == "exited" else f"; it passed the limit before the {ending.stop} limit stopped it"
    return (Verdict.MEMORY_LIMIT, code, None if ending.stop == "exited" else signals.SIGKILL,
            f"peak resident memory of {peak} bytes passed the memory limit of {bound} bytes (rusage of the run, "
            f"read when it ended){stopped}")


def _caught_limit(ending: Ending, limits: Limits, code: int) -> tuple[Verdict, int, None, str] | None:
    """The verdict of a limit the program ran into without dying of it: a fork refused with
    EAGAIN, the work dir full (ENOSPC), a file at the size bound (EFBIG, SIGXFSZ blocked)."""
    if ending.forks_refused:
        return (Verdict.PROCESS_LIMIT, code, None,
                f"the process limit of {limits.processes} refused {ending.forks_refused} fork(s); exited with {code}")
    if ending.work_full:
        return (Verdict.DISK_LIMIT, code, None,
                f"the work dir's {limits.work_bytes} byte total-size bound was reached; exited with {code}")
    if ending.big_file:
        return (Verdict.OUTPUT_LIMIT, code, None,
                f"a file reached the {limits.output_bytes} byte file-size limit; exited with {code}")
    return None


def _by_signal(sig: int, ending: Ending, limits: Limits) -> tuple[Verdict, int | None, int | None, str]:
    if sig == signals.SIGXCPU or (sig == signals.SIGKILL and limits.cpu_s and ending.cpu_s >= limits.cpu_s):
        return Verdict.TIME_LIMIT, None, sig, f"CPU-time limit of {limits.cpu_s:g} s reached ({_name(sig)})"
    if sig == signals.SIGXFSZ:
        return (Verdict.OUTPUT_LIMIT, None, sig,
                f"a file reached the {limits.output_bytes} byte file-size limit ({_name(sig)})")
    return Verdict.KILLED, None, sig, f"killed by {_name(sig)}"
