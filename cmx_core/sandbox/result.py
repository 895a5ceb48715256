"""What a sandboxed run did: a typed verdict, the resources it used and its capped output."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cmx_core.sandbox.workfs import Dropped


class Verdict(str, enum.Enum):
    """How a sandboxed run ended.

    ``time_limit`` covers both the wall-clock and the CPU-time bound; ``output_limit`` both
    the captured-output cap and the largest-file bound; ``process_limit`` a run whose forks
    the process limit refused (even when the program caught the error); ``disk_limit`` a
    run that filled the work dir's total-size bound (``Limits.work_bytes``); ``killed`` a
    signal that no limit explains; ``error`` a non-zero exit (``exit_code``) or a sandbox
    that could not start.
    """

    OK = "ok"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    PROCESS_LIMIT = "process_limit"
    DISK_LIMIT = "disk_limit"
    KILLED = "killed"
    ERROR = "error"


@dataclass(frozen=True)
class SandboxResult:
    """The verdict and measurements of one run.

    ``exit_code`` is the program's exit status when it exited, ``signal`` the signal that
    ended it otherwise. ``cpu_s`` is user plus system time of everything the run started and
    ``peak_memory_bytes`` the largest memory charge of the run (page cache included), both
    read from the run's cgroups, or without them from ``wait4``'s rusage and the memory
watchdog (``watchdog.py``). ``stdout`` and
    ``stderr`` together hold at most ``Limits.output_bytes``; ``truncated`` says bytes were
    dropped. ``enforced`` names the mechanism behind each limit in this run
    (``memory=cgroup``, ``processes=rlimit``...), so a result says how it was confined.
    ``dropped`` lists the files the program left that were not brought back to the host
    (``Limits.keep_bytes``), with their sizes.
    """

    verdict: Verdict
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float | None
    peak_memory_bytes: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool
    reason: str
    backend: str
    enforced: tuple[str, ...] = ()
    dropped: tuple[Dropped, ...] = ()

    @property
    def enforced_by(self) -> dict[str, str]:
        """``enforced`` as a mapping, limit -> mechanism (``{"memory": "cgroup", ...}``); an
        entry without ``=`` (none so far) maps to ``"yes"``."""
        pairs = (entry.split("=", 1) if "=" in entry else (entry, "yes") for entry in self.enforced)
        return {key: value for key, value in pairs}

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.OK

    def text(self, stream: str = "stdout") -> str:
        """``stdout`` or ``stderr`` decoded as UTF-8 (undecodable bytes replaced)."""
        data = self.stdout if stream == "stdout" else self.stderr
        return data.decode("utf-8", errors="replace")
