"""``kill-worker``: the cluster executor kills the job's worker once the job runs
(:meth:`cmx_core.run.remote.RemoteExecutor.kill_worker`: a Slurm node set down, a Ray
raylet killed, a Kubernetes pod evicted). Only an executor that lists it in
``Executor.injects`` may inject it; every other refuses it, exit 2."""

from __future__ import annotations

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector
from cmx_core.providers.recovery import FaultKind, Injection

KIND = FaultKind("kill-worker")


class KillWorker(StepInjector):
    kind = KIND
    by_executor = True

    def check(self, injection: Injection, executor: str) -> None:
        raise UsageError(f"--inject {injection.text}: the {executor} executor has no worker to kill; "
                         "use a cluster executor that kills its worker (slurm, k8s; docs/faults.md)")


INJECTOR = KillWorker()
KILL_WORKER = KIND
