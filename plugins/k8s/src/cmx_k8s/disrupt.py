"""``--inject kill-worker`` on Kubernetes (docs/faults.md): the Job's running pod is evicted
through the Eviction API (``POST .../pods/NAME/eviction``, what a node drain does), so it
ends with the ``DisruptionTarget`` condition: the Job's ``podFailurePolicy`` ignores it (a
policy that retries lost nodes) and the Job controller starts a new pod, or it counts
against ``backoffLimit``. Every wait is bounded by :data:`DEADLINE_S`.
"""

from __future__ import annotations

import time
from typing import Any

from cmx_core.api import CmxError, FaultClass, WorkerKill

DEADLINE_S = 600.0
TICK_S = 0.1


def evict_running_pod(core: Any, batch: Any, job: str, namespace: str) -> WorkerKill:
    """Evict the Job's pod once it runs, and follow the Job until a new pod runs or it ends."""
    from kubernetes import client  # deferred: heavy, only this injection needs it

    deadline = time.monotonic() + DEADLINE_S
    victim = _running_pod(core, batch, job, namespace, deadline, exclude=set())
    if victim is None:
        raise CmxError(f"Job {job} ended before its pod could be evicted")
    struck = time.time()
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=victim, namespace=namespace))
    core.create_namespaced_pod_eviction(victim, namespace, body)
    while victim in _pods(core, job, namespace, running_only=True):
        if time.monotonic() > deadline:
            raise CmxError(f"pod {victim} still runs {DEADLINE_S:g} s after its eviction")
        time.sleep(TICK_S)
    lost_at = time.time()
    replacement = _running_pod(core, batch, job, namespace, deadline, exclude={victim})
    return WorkerKill(struck, lost_at, time.time() if replacement else None, FaultClass.NODE_LOST,
                      f"Kubernetes: pod {victim} of Job {job} evicted (DisruptionTarget)"
                      + (f"; the Job started pod {replacement}" if replacement else ""))


def _running_pod(core: Any, batch: Any, job: str, namespace: str, deadline: float,
                 exclude: set[str]) -> str | None:
    """The name of a running pod of the Job not in ``exclude``; None once the Job ended."""
    while time.monotonic() < deadline:
        found = [p for p in _pods(core, job, namespace, running_only=True) if p not in exclude]
        if found:
            return found[0]
        status = batch.read_namespaced_job_status(job, namespace).status
        if any(c.status == "True" and c.type in ("Complete", "Failed") for c in status.conditions or ()):
            return None
        time.sleep(TICK_S)
    raise CmxError(f"no pod of Job {job} ran within {DEADLINE_S:g} s")


def _pods(core: Any, job: str, namespace: str, running_only: bool) -> list[str]:
    items = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
    return [p.metadata.name for p in items if not running_only or p.status.phase == "Running"]
