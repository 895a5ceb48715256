"""``--inject kill-worker`` on Ray (docs/faults.md): the raylet of the worker node that runs
the task is killed with SIGKILL, which is how a lost node looks to Ray: the GCS misses its
health checks and marks the node dead, its workers die with it, and a task submitted with
``max_retries`` (a policy that retries ``node_lost``) runs again on another node.

Only a raylet on this machine can be killed (a local multi-node cluster, as Ray's own
``ray.cluster_utils.Cluster`` or ``ray start --address`` on one machine makes): the task's
far process is found by the token in its environment (:data:`TOKEN_ENV`), and its raylet
among its ancestors. A task that runs on the head node is not struck (killing the head's
raylet ends the whole cluster): the run fails with a message saying so. Every wait is
bounded by :data:`DEADLINE_S`.
"""

from __future__ import annotations

import signal
import time

import psutil

from cmx_core.api import CmxError, FaultClass, WorkerKill
from cmx_ray.far import TOKEN_ENV

DEADLINE_S = 600.0
TICK_S = 0.2
HEAD_RESOURCE = "node:__internal_head__"


def kill_worker(token: str, ref: object, retries: int) -> WorkerKill:
    """Kill the raylet of the node running the task whose far process carries ``token``;
    follow it until Ray has marked the node dead and, when ``retries`` allow, the task runs
    again (a new far process with the same token) or ends."""
    deadline = time.monotonic() + DEADLINE_S
    far = _far_process(token, ref, deadline, exclude=set())
    if far is None:
        raise CmxError("the Ray task ended before its node could be killed")
    raylet, node_id = _raylet_of(far)
    if _is_head(node_id):
        raise CmxError(f"the task runs on the head node ({node_id[:12]}), whose raylet is the whole cluster's: "
                       "run it on a cluster with worker nodes (`ray start --address=HEAD` on this machine), "
                       "with the head's CPUs at 0 so tasks go to the workers")
    if node_id == _driver_node():
        raise CmxError(f"the task runs on node {node_id[:12]}, the one this cmx process is attached to: "
                       "killing its raylet would end this process too")
    struck = time.time()
    killed = _kill_node(raylet)
    _wait_dead(node_id, deadline)
    lost_at = time.time()
    again = _far_process(token, ref, deadline, exclude=killed) if retries > 0 else None
    return WorkerKill(struck, lost_at, time.time() if again is not None else None, FaultClass.NODE_LOST,
                      f"Ray: node {node_id[:12]} lost (its raylet, pid {raylet.pid}, and the {len(killed) - 1} "
                      "processes under it killed); "
                      + ("the task ran again on another node" if again is not None else "the task was not retried"))


def _kill_node(raylet: psutil.Process) -> set[int]:
    """SIGKILL the raylet and every process under it (the node's workers, the task's far
    process and its steps, the node's agents), as a machine that fails takes them all: a
    worker left running could still finish the task and hand its result to the driver. The
    PIDs killed."""
    try:
        below = raylet.children(recursive=True)
    except psutil.Error:
        below = []
    killed = set()
    for process in (raylet, *below):
        try:
            process.send_signal(signal.SIGKILL)
            killed.add(process.pid)
        except psutil.NoSuchProcess:
            pass
    return killed


def _far_process(token: str, ref: object, deadline: float, exclude: set[int]) -> psutil.Process | None:
    """The running far process of the task (not one of ``exclude``): the process that carries
    the token under a parent that does not (its steps inherit the token too); None once the
    task ended."""
    import ray  # deferred: ray only when this runs (513 modules)

    while time.monotonic() < deadline:
        for process in psutil.process_iter():
            if process.pid not in exclude and _carries(process, token) and not _carries(_parent(process), token):
                return process
        ready, _ = ray.wait([ref], timeout=0)
        if ready:
            return None
        time.sleep(TICK_S)
    raise CmxError(f"the Ray task's process did not appear on this machine within {DEADLINE_S:g} s: "
                   "kill-worker kills a raylet on this machine (a local multi-node cluster)")


def _parent(process: psutil.Process) -> psutil.Process | None:
    try:
        return process.parent()
    except psutil.Error:
        return None


def _carries(process: psutil.Process | None, token: str) -> bool:
    if process is None:
        return False
    try:
        return process.environ().get(TOKEN_ENV) == token
    except (psutil.Error, OSError):  # another user's process, or one that just ended
        return False


def _raylet_of(process: psutil.Process) -> tuple[psutil.Process, str]:
    """The raylet among the far process's ancestors, and its node's ID (``--node_id=``)."""
    try:
        for parent in process.parents():
            argv = parent.cmdline()
            if argv and argv[0].endswith("/raylet"):
                node = next((a.split("=", 1)[1] for a in argv if a.startswith("--node_id=")), "")
                if node:
                    return parent, node
    except psutil.Error as exc:
        raise CmxError(f"the Ray task's process ended while its raylet was looked up ({exc})") from None
    raise CmxError(f"no raylet among the ancestors of the Ray task's process {process.pid}")


def _nodes() -> list[dict[str, object]]:
    import ray  # deferred: ray only when this runs (513 modules)

    return list(ray.nodes())  # type: ignore[no-untyped-call]


def _is_head(node_id: str) -> bool:
    return any(n.get("NodeID") == node_id and HEAD_RESOURCE in dict(n.get("Resources") or {})  # type: ignore[call-overload]
               for n in _nodes())


def _driver_node() -> str:
    import ray  # deferred: ray only when this runs (513 modules)

    return str(ray.get_runtime_context().get_node_id())


def _wait_dead(node_id: str, deadline: float) -> None:
    """Until the GCS lists the node as dead (it misses the raylet's health checks)."""
    while time.monotonic() < deadline:
        if any(n.get("NodeID") == node_id and not n.get("Alive") for n in _nodes()):
            return
        time.sleep(TICK_S)
    raise CmxError(f"Ray still lists node {node_id[:12]} alive {DEADLINE_S:g} s after its raylet was killed")
