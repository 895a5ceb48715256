"""The default backend: cmx-core's bubblewrap sandbox. A single call (a compile, the inputs'
generator) is one sandbox run; a worker's series of cases and tester calls runs in one
sandbox session (``lane``), which starts bubblewrap once for the series instead of twice a
case, each call still under its own limits and with its own verdict."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from cmx_alebench.runner import Call, Ending, Ran
from cmx_core.api import Limits, SandboxResult, SandboxSpec, get_sandbox
from cmx_core.api.sandboxing import BubblewrapSession, pick_cpus, session_unavailable
from cmx_core.errors import UsageError

_ENDINGS = {"ok": Ending.EXITED, "error": Ending.EXITED, "time_limit": Ending.TIME, "memory_limit": Ending.MEMORY,
            "output_limit": Ending.OUTPUT, "killed": Ending.SIGNALED,
            # a refused fork (the pids group's own count: cleaning up after cannot hide it) is a
            # limit hit, judged RE as ALE-Bench's container judge gives a program whose fork
            # fails; a full work dir is a file bound, OLE
            "process_limit": Ending.PROCESS, "disk_limit": Ending.OUTPUT}


def spec_of(call: Call, root_fs: str | None = None) -> SandboxSpec:
    """The sandbox spec of a judge call: no network, one CPU, the call's limits, the judge's
    system root (``root_fs``: an exported judge image's; None: the host's ``/usr``)."""
    limits = call.limits
    return SandboxSpec(argv=list(call.argv), work_dir=str(call.work_dir), ro_binds=dict(call.binds),
                       env=dict(call.env), stdin=call.stdin, root_fs=root_fs,
                       limits=Limits(wall_s=limits.wall_s, cpu_s=limits.cpu_s, memory_bytes=limits.memory_bytes,
                                     processes=limits.processes, output_bytes=limits.output_bytes,
                                     work_bytes=limits.work_bytes, cpus=1))


def ran_of(result: SandboxResult) -> Ran:
    """A sandbox result in the judge's terms."""
    ending = _ENDINGS[result.verdict.value]
    if result.verdict.value == "error" and result.exit_code is not None and "could not start" in result.reason:
        ending = Ending.FAILED
    return Ran(ending=ending, exit_code=result.exit_code, wall_s=result.wall_s, cpu_s=result.cpu_s,
               memory_bytes=result.peak_memory_bytes, stdout=result.stdout, stderr=result.stderr,
               reason=result.reason)


class SandboxRunner:
    """Runs each call in a fresh bubblewrap sandbox; ``lane`` keeps one up for a series.

    ``sessions=False`` judges every call in a sandbox of its own (the slower way, kept for
    comparison and for hosts where sessions cannot run: not root, no cgroup v1).
    ``root_fs`` (bubblewrap only): every call runs with that root filesystem as its system
    root, read-only (a judge image's, exported by ``judge_image.py``), under the same limits."""

    name = "sandbox"

    def __init__(self, backend: str = "bubblewrap", sessions: bool = True, root_fs: str | None = None) -> None:
        if root_fs is not None and backend != "bubblewrap":
            raise UsageError(f"a judge image's root filesystem needs the bubblewrap sandbox, not {backend!r}")
        self.sandbox = get_sandbox(backend)
        self.root_fs = root_fs
        self.sessions = sessions and backend == "bubblewrap" and session_unavailable() is None
        self.enforced_by: dict[str, str] = {}
        """How each limit of the calls so far was enforced (limit -> mechanism, as the sandbox says)."""

    def run(self, call: Call) -> Ran:
        return self.noted(self.sandbox.run(spec_of(call, self.root_fs)))

    def noted(self, result: SandboxResult) -> Ran:
        self.enforced_by.update(result.enforced_by)
        return ran_of(result)

    @contextmanager
    def lane(self, root: Path, binds: Mapping[str, str]) -> Iterator[SandboxRunner | SessionLane]:
        if not self.sessions:
            yield self
            return
        with BubblewrapSession(root, binds, cpus=pick_cpus(1), root_fs=self.root_fs) as session:
            yield SessionLane(session, self)


class SessionLane:
    """A worker's calls in one sandbox session."""

    name = "sandbox"

    def __init__(self, session: BubblewrapSession, owner: SandboxRunner) -> None:
        self.session = session
        self.owner = owner

    def run(self, call: Call) -> Ran:
        return self.owner.noted(self.session.run(spec_of(call, self.owner.root_fs)))
