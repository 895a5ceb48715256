"""The default backend: each call is one run of cmx-core's bubblewrap sandbox."""

from __future__ import annotations

from cmx_alebench.runner import Call, Ending, Ran
from cmx_core.api import Limits, SandboxSpec, get_sandbox

_ENDINGS = {"ok": Ending.EXITED, "error": Ending.EXITED, "time_limit": Ending.TIME, "memory_limit": Ending.MEMORY,
            "output_limit": Ending.OUTPUT, "killed": Ending.SIGNALED}


class SandboxRunner:
    """Runs each call in a fresh bubblewrap sandbox: no network, one CPU, the call's limits."""

    name = "sandbox"

    def __init__(self, backend: str = "bubblewrap") -> None:
        self.sandbox = get_sandbox(backend)

    def run(self, call: Call) -> Ran:
        limits = call.limits
        spec = SandboxSpec(argv=list(call.argv), work_dir=str(call.work_dir), ro_binds=dict(call.binds),
                           env=dict(call.env), stdin=call.stdin,
                           limits=Limits(wall_s=limits.wall_s, cpu_s=limits.cpu_s, memory_bytes=limits.memory_bytes,
                                         processes=limits.processes, output_bytes=limits.output_bytes, cpus=1))
        result = self.sandbox.run(spec)
        ending = _ENDINGS[result.verdict.value]
        if result.verdict.value == "error" and result.exit_code is not None and "could not start" in result.reason:
            ending = Ending.FAILED
        return Ran(ending=ending, exit_code=result.exit_code, wall_s=result.wall_s, cpu_s=result.cpu_s,
                   memory_bytes=result.peak_memory_bytes, stdout=result.stdout, stderr=result.stderr,
                   reason=result.reason)
