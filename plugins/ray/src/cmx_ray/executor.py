"""The ``ray`` executor: each run is one Ray task, submitted with ``num_cpus``, ``num_gpus``
and Ray's ``accelerator_type:<X>`` resource.

It is a :class:`cmx_core.api.RemoteExecutor`: the base ships the run's ``lock.json`` and
folds the far result back; this module says how the task is submitted (the lock travels as
the task's argument), waited for, fetched from (the task returns the far run directory's
files, which are written into ``<run dir>/remote``) and cancelled. The far side is
:func:`cmx_ray.far.run_far` on the node Ray picks, so the result carries that node's facts.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx_core.api import (
    CmxError,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    FaultClass,
    Fetched,
    JobStatus,
    RemoteExecutor,
    RemoteJob,
    UsageError,
    WorkerKill,
    scheduler_retries,
)
from cmx_ray import cluster, far, nodeset, runs, worker
from cmx_ray.resources import TaskResources, missing, task_resources
from cmx_ray.settings import RaySettings

_LOG_TAIL = 10
_CANCEL_GRACE_S = 5.0
WATCH_S = 2.0
"""How often the wait for a task looks at the cluster's nodes (:meth:`RayExecutor._watch`)."""


@dataclass
class RayHandle:
    """A submitted task; ``result`` is filled in by :meth:`RayExecutor.wait`."""

    ref: Any
    resources: TaskResources
    timeout_s: float | None
    cluster: str
    token: str = ""
    """In the far process's environment (:data:`cmx_ray.far.TOKEN_ENV`): how kill-worker finds
    it, and the key of its runs' start stamps (:mod:`cmx_ray.runs`)."""
    max_retries: int = 0
    result: far.FarResult | None = None
    submitted: float = 0.0
    storage: str = ""
    """The task's directory in the shared ``storage`` (empty: none)."""
    launch: Callable[[int, int, int], Any] | None = None
    """Submit the task again: (submission, runs before it, Ray's retries for it) -> its ref."""
    given_up: list[runs.GivenUp] = field(default_factory=list)
    """The runs the driver gave up as cut off from the head (:func:`cmx_ray.runs.cut_off`);
    each but a last one that ended the task was followed by a submission, so their count is
    the number of the submission in progress."""
    nodes: nodeset.NodeSet | None = None
    """A multi-node run's placement group and other nodes' tasks (``ref`` is node 0's)."""
    peers: list[dict[str, str]] = field(default_factory=list)
    """Where the other nodes' runs ran (filled in when node 0's ended)."""


def retry_options(request: ExecutionRequest) -> dict[str, Any]:
    """Ray's own task retries from the run's recovery policy (docs/faults.md): ``max_retries``
    reruns the task when its worker or node dies, when the policy retries ``node_lost``;
    ``retry_exceptions`` stays off: a failed step is retried by the far engine's own policy
    by fault class, so a refused input (exit code 2) is never retried."""
    retries = min(scheduler_retries(request, (FaultClass.NODE_LOST,)), runs.PER_SUBMISSION - 1)
    return {"max_retries": retries, "retry_exceptions": False}


class RayExecutor(RemoteExecutor[RayHandle]):
    name = "ray"
    native_retries = frozenset({FaultClass.NODE_LOST})  # max_retries (docs/faults.md)
    kills_workers = True  # the raylet of the task's node killed (cmx_ray.worker)
    summary = "Run the plan as a Ray task (num_cpus, num_gpus, accelerator_type) on a cluster or a private one"
    settings = RaySettings

    def retried_natively(self, request: ExecutionRequest) -> frozenset[FaultClass]:
        """None for a multi-node run: Ray does not run one node's task again (the other nodes'
        ranks are gone with it), so cmx's policy retries the run whole (:mod:`cmx_ray.nodeset`)."""
        settings = request.context.settings
        assert isinstance(settings, RaySettings)
        nodes = task_resources(request.context.plan, settings, request.context.gpus).nodes
        return self.native_retries if nodes <= 1 else frozenset()

    def __init__(self) -> None:
        self.cluster_name = ""
        self.handles: list[RayHandle] = []
        """The tasks :meth:`submit` made for the run in progress (one, unless cmx resubmitted)."""
        self.dead_since: dict[str, float] = {}
        """When this driver first saw each node the GCS declared dead (the runs' watch)."""

    # -- plan time -----------------------------------------------------------------------

    def check_plan(self, context: ExecutionContext) -> None:
        """Bad settings are refused; when connected (an address, or a Ray this process
        already runs), so is a plan that needs GPUs or an accelerator type the cluster lacks."""
        settings = context.settings
        assert isinstance(settings, RaySettings)
        resources = task_resources(context.plan, settings, context.gpus)
        if not settings.address and not cluster.callers_ray():
            return  # a private cluster has this machine's resources, which the resolver checked
        with cluster.session(settings.address, settings.cluster_cpus) as where:
            refuse_missing(resources, where)

    def describe(self, context: ExecutionContext) -> dict[str, Any]:
        settings = context.settings
        assert isinstance(settings, RaySettings)
        resources = task_resources(context.plan, settings, context.gpus)
        return {"cluster": settings.address or "a private local cluster for this run",
                "num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus,
                "accelerator_type": resources.accelerator_type or "any",
                **({"nodes": f"{resources.nodes} (a task on each, STRICT_SPREAD; node 0's result is the run's)"}
                   if resources.nodes > 1 else {}),
                "far side": "cmx run --lock lock.json --allow-drift=remote --executor local --json (a Ray task)",
                **({"memory_bytes": resources.memory} if resources.memory else {}),
                "timeout_s": resources.timeout_s or "none", "max_result_mb": settings.max_result_mb}

    # -- the run -------------------------------------------------------------------------

    def run(self, request: ExecutionRequest) -> ExecutionOutcome:
        assert isinstance(request.context.settings, RaySettings)
        with cluster.session(request.context.settings.address, request.context.settings.cluster_cpus) as where:
            self.cluster_name, self.handles = where, []
            outcome = super().run(request)
            found = [(handle, task_runs(handle, request.run_dir)) for handle in self.handles]
            if len(found) != 1:  # cmx resubmitted: its own attempts and times stand
                return outcome
            handle, seen = found[0]
            return runs.with_runs(outcome, request, handle.submitted, seen, handle.given_up)

    def cmx_command(self, request: ExecutionRequest) -> tuple[str, ...]:
        assert isinstance(request.context.settings, RaySettings)
        if request.context.settings.cmx.strip():
            return tuple(shlex.split(request.context.settings.cmx))
        return (sys.executable, "-m", "cmx_core")

    def far_paths(self, request: ExecutionRequest, stage_dir: Path, local_output: Path) -> tuple[str, str]:
        return far.LOCK_NAME, far.OUTPUT_NAME  # relative to the task's own directory on the node

    def job_env(self, request: ExecutionRequest) -> dict[str, str]:
        assert isinstance(request.context.settings, RaySettings)
        return {name: os.environ[name] for name in request.context.settings.env if name in os.environ}

    def submit(self, job: RemoteJob) -> RayHandle:
        handle = self.submit_checked(job, check_cluster=True)
        self.handles.append(handle)
        return handle

    def submit_checked(self, job: RemoteJob, check_cluster: bool) -> RayHandle:
        """Submit ``job``; ``check_cluster``: first refuse it when the cluster lacks what it
        needs (one query of the cluster's resources; a batch asks once for all its tasks)."""
        settings = job.request.context.settings
        assert isinstance(settings, RaySettings)
        if settings.max_result_mb <= 0:
            raise UsageError(f"ray executor option max_result_mb={settings.max_result_mb:g}: use a number above 0")
        resources = task_resources(job.request.context.plan, settings, job.request.context.gpus)
        if check_cluster:
            refuse_missing(resources, self.cluster_name)
        retries, token = retry_options(job.request), uuid.uuid4().hex
        storage = str(Path(settings.storage).absolute() / token) if settings.storage else ""
        arguments = (list(job.command), {**job.env, far.TOKEN_ENV: token}, (job.stage_dir / "lock.json").read_bytes(),
                     int(settings.max_result_mb * 1e6), storage)

        def launch(submission: int, earlier: int, max_retries: int) -> Any:
            return _far_task().options(**resources.ray_options(), max_retries=max_retries,
                                       retry_exceptions=False).remote(*arguments, far.Submission(submission, earlier))

        submitted = time.time()
        if resources.nodes > 1:
            return _submit_nodes(resources, arguments, (self.cluster_name, token, submitted))
        ref = launch(0, 0, retries["max_retries"])
        return RayHandle(ref, resources, resources.timeout_s, self.cluster_name, token, retries["max_retries"],
                         submitted=submitted, storage=storage, launch=launch)

    def kill_worker(self, handle: RayHandle) -> WorkerKill:
        return worker.kill_worker(handle.token, handle.ref, handle.max_retries)

    def wait(self, handle: RayHandle) -> JobStatus:
        try:
            return self._wait_task(handle)
        finally:
            if handle.nodes is not None:
                nodeset.release(handle.nodes)

    def _wait_task(self, handle: RayHandle) -> JobStatus:
        import ray  # deferred: ray only when this runs (513 modules)
        from ray import exceptions  # deferred: ray only when this runs (513 modules)

        deadline = None if handle.timeout_s is None else time.monotonic() + handle.timeout_s
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.cancel(handle)
                return JobStatus("timeout", None, f"Ray task cancelled after {handle.timeout_s:g} s (timeout_s)")
            ready, _ = ray.wait([handle.ref], timeout=WATCH_S if left is None else min(WATCH_S, left))
            if ready:
                break
            peer_ended = nodeset.failed_peer(handle.nodes) if handle.nodes else None
            if peer_ended is not None:
                self.cancel(handle)
                return peer_ended
            given_up = self._watch(handle)
            if given_up is not None:
                return given_up
        try:
            handle.result = ray.get(handle.ref)
            if handle.nodes is not None:
                handle.peers = [dict(n) for n in nodeset.identities(handle.nodes, _CANCEL_GRACE_S * 6)]
        except exceptions.TaskCancelledError:
            return JobStatus("cancelled", None, "the Ray task was cancelled")
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.ObjectLostError) as exc:
            return JobStatus("lost", None, cluster.first_line(exc))
        except exceptions.OutOfMemoryError as exc:
            return JobStatus("oom", None, cluster.first_line(exc))
        except exceptions.RayTaskError as exc:
            return JobStatus("failed", None, f"the Ray task raised: {cluster.first_line(exc)}")
        refused = _refused(handle)
        if refused:
            handle.result = None  # nothing of a fenced run is written into the run directory
            return JobStatus("lost", None, refused)
        return _status(handle.result)

    def _watch(self, handle: RayHandle) -> JobStatus | None:
        """Give up the task's run when it is cut off from the head (:func:`cmx_ray.runs.cut_off`):
        submit the task again while the policy allows a run more (None), else end it as lost."""
        import ray  # deferred: ray only when this runs (513 modules)

        now = time.time()
        dead = {str(n["NodeID"]) for n in ray.nodes() if not n["Alive"]}  # type: ignore[no-untyped-call]
        for node in dead:
            self.dead_since.setdefault(node, now)
        if not dead:
            return None
        seen = runs.read(handle.token, remove=False)
        cut = runs.cut_off(seen, {n: t for n, t in self.dead_since.items() if n in dead}, now)
        if cut is None or any(g.number == cut[0] for g in handle.given_up):
            return None
        number, node = cut
        why = (f"the GCS declared node {node[:12]} dead while run {seen.ordinal(number)} of the task ran there and "
               f"Ray did not start the task again within {runs.GRACE_S:g} s (it does not while the worker's connection "
               "stands: a node cut off from the head): cmx gave the run up")
        handle.given_up.append(runs.GivenUp(number, now, why))
        ray.cancel(handle.ref, force=False)  # so that Ray does not run it again once the node's connection breaks
        left = 1 + handle.max_retries - len(seen.starts)
        if left <= 0 or handle.launch is None:
            return JobStatus("lost", None, f"{why}; the policy allows no further run (--retry-on node_lost)")
        handle.ref = handle.launch(len(handle.given_up), len(seen.starts), left - 1)
        return None

    def fetch(self, handle: RayHandle, job: RemoteJob) -> Fetched:
        """Write the returned files into ``job.local_output``; keep the far log and where
        the task ran as logs."""
        run_dir = job.request.run_dir
        result = handle.result
        if result is not None:
            far.write_files(result.files, job.local_output)
        log = run_dir / "ray.log"
        log.write_bytes(result.log if result is not None else b"")
        record = run_dir / "ray-job.json"
        record.write_text(json.dumps({"cluster": handle.cluster, "resources": asdict(handle.resources),
                                      "node": dict(result.node) if result else {},
                                      **({"other_nodes": handle.peers} if handle.nodes else {}),
                                      "run": result.attempt if result else None,
                                      "exit_code": result.exit_code if result else None,
                                      "files": sorted(result.files) if result else []}, indent=2))
        return Fetched(logs=(log, record))

    def cancel(self, handle: RayHandle) -> None:
        """``ray.cancel`` first without force (the task kills its child's process group and
        ends), then with ``force=True`` if it has not ended within a few seconds."""
        import ray  # deferred: ray only when this runs (513 modules)

        ray.cancel(handle.ref, force=False)
        ready, _ = ray.wait([handle.ref], timeout=_CANCEL_GRACE_S)
        if not ready:
            ray.cancel(handle.ref, force=True)
            ray.wait([handle.ref], timeout=_CANCEL_GRACE_S)
        if handle.nodes is not None:
            nodeset.release(handle.nodes)


def _submit_nodes(resources: TaskResources, arguments: tuple[Any, ...], where: tuple[str, str, float]) -> RayHandle:
    """A multi-node run (:mod:`cmx_ray.nodeset`): one far task on each node of a placement
    group, told its node rank; the handle waits for node 0's. ``where``: the cluster's name,
    the run's token and when it was submitted."""
    cluster_name, token, submitted = where
    command, env, lock, max_bytes, storage = arguments
    nodes = nodeset.place(resources, token)
    refs = []
    for rank in range(resources.nodes):
        told = {**env, far.TOKEN_ENV: token if rank == 0 else f"{token}-node{rank}",
                **nodeset.node_env(nodes, rank, resources.nodes, f"cmx-ray-{token[:12]}")}
        refs.append(_far_task().options(**resources.ray_options(), max_retries=0, retry_exceptions=False,
                                        **nodeset.strategy(nodes, rank)).remote(
            command, told, lock, max_bytes, storage if rank == 0 else ""))  # the shared storage is node 0's run's
    nodes.peers = refs[1:]
    return RayHandle(refs[0], resources, resources.timeout_s, cluster_name, token, 0, submitted=submitted,
                     storage=storage, nodes=nodes)


def _refused(handle: RayHandle) -> str:
    """Why the result Ray handed back is refused: it came from a run that a later run of the
    task superseded (fencing, :mod:`cmx_ray.runs`); "" when it is the latest run's."""
    result = handle.result
    if result is None:
        return ""
    if result.fenced:
        return result.error
    return runs.refusal(runs.read(handle.token, remove=False), result.attempt)


def task_runs(handle: RayHandle, run_dir: Path) -> runs.TaskRuns:
    """What the store says of the ended task's runs (its entries cleared), with the runs its
    shared storage says were fenced; the lost runs' directories kept (:func:`keep_lost_runs`)."""
    seen = runs.read(handle.token)
    fenced = keep_lost_runs(handle, run_dir, seen)
    return replace(seen, fenced=seen.fenced | fenced)


def keep_lost_runs(handle: RayHandle, run_dir: Path, seen: runs.TaskRuns) -> frozenset[int]:
    """Move the far directories of the lost runs from the shared storage into the run
    directory (``remote-attempt-N``, N the run's place, as a resubmitted job's are), then
    remove the task's directory there. The runs whose directory says they were fenced."""
    if not handle.storage:
        return frozenset()
    storage, fenced = Path(handle.storage), set()
    for number, path in far.lost_runs(storage):
        if (path / far.OUTPUT_NAME / far.FENCED).is_file():
            fenced.add(number)
        place = seen.ordinal(number) if seen.starts else number + 1  # no stamps: Ray's own numbering
        kept = run_dir / f"{far.OUTPUT_NAME}-attempt-{place}"
        if (path / far.OUTPUT_NAME).is_dir() and not kept.exists():
            shutil.move(str(path / far.OUTPUT_NAME), kept)
    shutil.rmtree(storage, ignore_errors=True)
    return frozenset(fenced)


def _status(result: far.FarResult) -> JobStatus:
    tail = " | ".join(line.strip() for line in result.log.decode(errors="replace").strip().splitlines()[-_LOG_TAIL:])
    if result.error:
        return JobStatus("failed", result.exit_code, result.error)
    if result.exit_code == 0:
        return JobStatus("completed", 0)
    return JobStatus("failed", result.exit_code, f"far cmx exited with code {result.exit_code}. Last lines: {tail}")


def refuse_missing(resources: TaskResources, where: str) -> None:
    gaps = missing(resources.needs(), cluster.cluster_resources())
    if gaps:
        raise CmxError(f"ray executor: {where} lacks what the plan needs: {', '.join(gaps)}; "
                       "connect to a cluster that has it (address=) or lower num_gpus/accelerator_type")


@functools.cache
def _far_task() -> Any:
    """The far task, made once per process: Ray exports a remote function to the cluster
    once per connection (again after a reconnection), not on every submission."""
    import ray  # deferred: ray only when this runs (513 modules)

    return ray.remote(far.run_far)

