"""The base of every executor that runs a plan somewhere else (a container, a Slurm job, a
Ray task, a Kubernetes Job): :class:`RemoteExecutor`.

The split follows ReFrame's scheduler/launcher and Snakemake's ``RemoteExecutor``: the base
decides *what* runs on the far side and how its result comes back; a subclass says only
*how to get it there* with four methods:

* :meth:`~RemoteExecutor.submit` starts the job for a :class:`RemoteJob` and returns a
  handle (a container id, a Slurm job id...);
* :meth:`~RemoteExecutor.wait` blocks until it ends and returns a :class:`JobStatus`;
* :meth:`~RemoteExecutor.fetch` brings the far run directory (``job.far_output``) back into
  ``job.local_output`` (nothing to do on a shared file system) and returns what else to
  keep: logs, artifacts, ``system`` keys;
* :meth:`~RemoteExecutor.cancel` stops the job (Ctrl-C, SIGTERM).

What the far side runs is always ``cmx run --lock lock.json --allow-drift=remote
--executor local --output DIR --json``: the lock written for this run is shipped, so the far
side cannot resolve a different graph (other recipes, versions, variations, inputs, steps or
plugins are refused there); only the facts may differ, because the far side detects its
own. The far engine writes ``result.json``, ``nodes.json`` and ``facts.json``; the base
folds them back into a typed :class:`~cmx_core.providers.types.ExecutionOutcome` carrying the
far node's facts, and the near engine records it under this run's id, once.

A minimal executor::

    class Subprocess(RemoteExecutor[subprocess.Popen[bytes]]):
        name = "subprocess"
        summary = "run the plan in a child process"

        def submit(self, job):
            return subprocess.Popen(list(job.command), env={**os.environ, **job.env})

        def wait(self, handle):
            code = handle.wait()
            return JobStatus("completed" if code == 0 else "failed", code)

        def fetch(self, handle, job):
            return Fetched()  # same file system: the far run directory is already here

        def cancel(self, handle):
            handle.kill()

    @hookimpl
    def cmx_register_executors(register):
        register(Subprocess().executor())
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

from cmx_core.errors import CmxError, Interrupted
from cmx_core.faults.kinds.kill_worker import KILL_WORKER
from cmx_core.faults.registry import INJECTORS
from cmx_core.plugins.registry import ExecutionContext, ExecutionRequest, Executor
from cmx_core.providers.attempts import Attempt
from cmx_core.providers.recovery import NO_RETRIES, FaultClass, Injection, RetryPolicy
from cmx_core.providers.types import (
    CachedMeasurement,
    ExecutionOutcome,
    ExecutorSettings,
    NodeResult,
    NoSettings,
    RunError,
)
from cmx_core.providers.values import Artifact, Capabilities, Metric, ResultPart
from cmx_core.results.envelope import ENGINE_KEYS
from cmx_core.results.gitinfo import ENGINE_COMMIT_ENV, engine_git_commit

H = TypeVar("H")
JobState = Literal["completed", "failed", "timeout", "oom", "cancelled", "lost", "preempted"]

JOB_FAULTS: Mapping[str, FaultClass] = {"lost": FaultClass.NODE_LOST, "preempted": FaultClass.PREEMPTED,
                                        "timeout": FaultClass.TIMEOUT, "oom": FaultClass.OOM}
"""The fault class of a job that ended so (docs/faults.md); a job that ran the far engine
to its end reports its steps' own attempts instead."""

REMOTE_DIR = "remote"
"""Where the far run directory lands inside the local run directory."""

STAGE_DIR = "remote-stage"
"""What the base ships to the far side: ``lock.json`` (and what a subclass adds)."""


@dataclass(frozen=True)
class RemoteJob:
    """One job to start: the command line of the far side and where things are.

    ``stage_dir`` holds what is shipped (``lock.json``); ``far_lock`` and ``far_output``
    are the paths the far side sees (the same as the local ones on a shared file system,
    or where a subclass mounts or copies them); ``local_output`` is where :meth:`fetch`
    puts the far run directory; ``env`` the variables the far side needs."""

    request: ExecutionRequest
    command: tuple[str, ...]
    stage_dir: Path
    far_lock: str
    far_output: str
    local_output: Path
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobStatus:
    """How a job ended. ``message`` is the scheduler's or engine's own words."""

    state: JobState
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class WorkerKill:
    """What :meth:`RemoteExecutor.kill_worker` did (``--inject kill-worker``): when it struck,
    when the scheduler took the job as lost (``fault``: ``node_lost``, or ``preempted`` where
    the scheduler says so), when the job ran again by the scheduler's own retry (None: it did
    not), and the scheduler's words."""

    struck_at: float
    lost_at: float
    restarted_at: float | None
    fault: FaultClass = FaultClass.NODE_LOST
    message: str = ""


@dataclass(frozen=True)
class Fetched:
    """What :meth:`RemoteExecutor.fetch` brings back besides the far run directory."""

    logs: tuple[Path, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    system: Mapping[str, Any] = field(default_factory=dict)


class RemoteExecutor(ABC, Generic[H]):
    """Subclass it, set ``name``, ``summary`` (and ``settings``, ``capabilities``), implement
    :meth:`submit`, :meth:`wait`, :meth:`fetch` and :meth:`cancel`; register
    :meth:`executor`. Override :meth:`cmx_command`, :meth:`far_paths` or :meth:`job_env`
    where the far side differs from this machine."""

    name: ClassVar[str]
    summary: ClassVar[str]
    runs_on_this_host: ClassVar[bool] = False
    """True when the far side runs on this machine (a container): the result's ``system``
    (name, CPU, memory, GPUs, OS) then comes from this host's facts, since a container's
    hostname is random and its ``/proc/meminfo`` ignores its limits; the far facts keep
    what describes the software (Python, torch, CUDA runtime, the container itself)."""
    settings: ClassVar[type[ExecutorSettings]] = NoSettings
    capabilities: ClassVar[Capabilities] = Capabilities()
    native_retries: ClassVar[frozenset[FaultClass]] = frozenset()
    """The fault classes the scheduler itself retries once the job asks it to (Slurm's
    ``--requeue``, Ray's ``max_retries``, a Kubernetes Job's ``backoffLimit``); the base
    resubmits the job for the other classes its policy names (:func:`job_policy`)."""

    def retried_natively(self, request: ExecutionRequest) -> frozenset[FaultClass]:
        """The faults the scheduler retries itself for this run: :attr:`native_retries`, unless
        the executor cannot for this run (Ray's multi-node run, whose node's task is not rerun)."""
        del request
        return self.native_retries

    # -- what a subclass implements ------------------------------------------------------

    @abstractmethod
    def submit(self, job: RemoteJob) -> H:
        """Start ``job`` and return its handle; raise a CmxError when it cannot start."""

    @abstractmethod
    def wait(self, handle: H) -> JobStatus:
        """Block until the job ends."""

    @abstractmethod
    def fetch(self, handle: H, job: RemoteJob) -> Fetched:
        """Bring ``job.far_output`` into ``job.local_output`` (if they differ)."""

    @abstractmethod
    def cancel(self, handle: H) -> None:
        """Stop the job; called on Ctrl-C or SIGTERM while waiting."""

    kills_workers: ClassVar[bool] = False
    """True when :meth:`kill_worker` is implemented (``--inject kill-worker`` is then allowed)."""

    def kill_worker(self, handle: H) -> WorkerKill:
        """Kill the worker that runs the job once it runs (``--inject kill-worker``), and
        wait (bounded) until the scheduler has taken the job as lost and, when it retries it
        itself, runs it again. Called in a thread while :meth:`wait` blocks; raise a
        CmxError when it cannot strike. Only executors with ``kills_workers`` implement it."""
        raise CmxError(f"the {self.name} executor cannot kill its worker")

    # -- what a subclass may override ----------------------------------------------------

    def cmx_command(self, request: ExecutionRequest) -> tuple[str, ...]:
        """How the far side starts cmx."""
        return ("cmx",)

    def far_paths(self, request: ExecutionRequest, stage_dir: Path, local_output: Path) -> tuple[str, str]:
        """(lock path, output directory) as the far side sees them; the local paths by
        default (a shared file system, a bind mount at the same path)."""
        return str(stage_dir / "lock.json"), str(local_output)

    def job_env(self, request: ExecutionRequest) -> dict[str, str]:
        """Variables for the far side. By default its results store is a scratch one inside
        the stage directory: the near engine indexes the result, once."""
        return {"CMX_DATA_DIR": str(request.run_dir / STAGE_DIR / "data")}

    def check_plan(self, context: ExecutionContext) -> None:
        """Refuse at plan time what would make the job fail on its input."""

    def describe(self, context: ExecutionContext) -> Mapping[str, Any]:
        """How the job would run, for ``cmx plan`` (the far command line by default)."""
        return {"far side": "cmx run --lock lock.json --allow-drift=remote --executor local --json"}

    # -- the template method -------------------------------------------------------------

    def executor(self) -> Executor:
        """The provider to register from ``cmx_register_executors``."""
        return Executor(name=self.name, summary=self.summary, run=self.run, settings=self.settings,
                        check_plan=self.check_plan, describe=self.describe, capabilities=self.capabilities,
                        runs_here=self.runs_on_this_host,
                        injects=frozenset({KILL_WORKER}) if self.kills_workers else frozenset())

    def run(self, request: ExecutionRequest) -> ExecutionOutcome:
        """Ship the lock, submit, wait (cancelling on Ctrl-C), fetch, fold the result back;
        resubmit a job that ended with a fault its policy retries and the scheduler does not.
        With ``--inject kill-worker`` the first job's worker is killed (:meth:`kill_worker`)."""
        job = self.prepare(request)
        context = request.context
        policy, number, attempts = job_policy(request), 1, []
        kill = next((i for i in context.recovery.injections if i.fault == KILL_WORKER), None)
        first_started = time.time()
        while True:
            started = time.time()
            status, fetched, struck = self._once(job, kill if number == 1 else None)
            if struck is not None and kill is not None and struck.restarted_at is not None:
                attempts.append(Attempt(context.plan.root.id, f"{self.name} job", number, started, struck.lost_at,
                                        struck.fault, struck.message, work_lost_s=struck.struck_at - started,
                                        injected=kill.text, injected_at=struck.struck_at))
                number, started = number + 1, struck.restarted_at
            outcome = fold(job, status, fetched, started, self.name)
            fault = job_fault(status, outcome)
            if fault is None or fault in self.retried_natively(request) or not policy.retries(fault, number):
                break
            attempts.append(Attempt(context.plan.root.id, f"{self.name} job", number, started, time.time(), fault,
                                    outcome.error.message if outcome.error else status.message,
                                    work_lost_s=time.time() - started, **_struck(kill, struck, number)))
            set_aside(job.local_output, number)
            time.sleep(policy.wait_s(number))
            number += 1
        if attempts or fault is not None:
            last = Attempt(context.plan.root.id, f"{self.name} job", number, started, outcome.finished, fault,
                           outcome.error.message if fault and outcome.error else "",
                           work_lost_s=outcome.finished - started if fault else 0.0, **_struck(kill, struck, number))
            # the run's time spans every job, the lost ones too
            outcome = replace(outcome, attempts=(*attempts, last, *outcome.attempts), started=first_started)
        if self.runs_on_this_host and outcome.facts is not None:
            outcome = replace(outcome, facts=with_host_machine(outcome.facts, context.facts.snapshot(MACHINE_FACTS)))
        return outcome

    def _once(self, job: RemoteJob, kill: Injection | None) -> tuple[JobStatus, Fetched, WorkerKill | None]:
        handle = self.submit(job)
        killer = _Killer(self, handle) if kill is not None else None
        try:
            status = self.wait(handle)
        except (KeyboardInterrupt, Interrupted):
            self.cancel(handle)
            raise Interrupted(f"interrupted; the {self.name} job was cancelled") from None
        fetched = self.fetch(handle, job)
        return status, fetched, killer.result() if killer is not None else None

    def prepare(self, request: ExecutionRequest) -> RemoteJob:
        """Stage ``lock.json`` and build the far side's command line."""
        stage = request.run_dir / STAGE_DIR
        stage.mkdir(parents=True, exist_ok=True)
        shutil.copy2(request.lock_path, stage / "lock.json")
        local_output = request.run_dir / REMOTE_DIR
        far_lock, far_output = self.far_paths(request, stage, local_output)
        command = (*self.cmx_command(request), *far_arguments(request, far_lock, far_output))
        env = self.job_env(request)
        commit = engine_git_commit()
        if commit:  # the far side's cmx may be a wheel without .git
            env = {**env, ENGINE_COMMIT_ENV: commit}
        return RemoteJob(request, command, stage, far_lock, far_output, local_output, env)


def job_fault(status: JobStatus, outcome: ExecutionOutcome) -> FaultClass | None:
    """The fault class of a job that ended in error by the scheduler's account (a lost node,
    a preemption, its time or memory limit); None when it did not, or when the far engine ran
    to its end and reported its steps' own attempts."""
    return JOB_FAULTS.get(status.state) if outcome.error is not None else None


@dataclass
class LostJobs:
    """The lost jobs of one run of a batch (a job array's task that the batch resubmits
    itself), so that its outcome carries every attempt, as :meth:`RemoteExecutor.run`'s does.
    ``policy``: the run's job policy (:func:`job_policy`)."""

    node: str
    label: str
    policy: RetryPolicy
    first_started: float
    lost: list[Attempt] = field(default_factory=list)

    @property
    def number(self) -> int:
        """The number of the attempt running now."""
        return len(self.lost) + 1

    def retries(self, fault: FaultClass | None) -> bool:
        """True when the policy retries ``fault`` after this attempt (exit code 2 is no fault)."""
        return fault is not None and self.policy.retries(fault, self.number)

    def lose(self, started: float, fault: FaultClass, message: str) -> float:
        """Record the attempt that started at ``started`` as lost to ``fault``; the seconds to
        wait (the policy's backoff) before the next one."""
        ended = time.time()
        self.lost.append(Attempt(self.node, self.label, self.number, started, ended, fault, message,
                                 work_lost_s=ended - started))
        return self.policy.wait_s(len(self.lost))

    def outcome(self, outcome: ExecutionOutcome, started: float, fault: FaultClass | None) -> ExecutionOutcome:
        """The run's outcome with every attempt: the lost ones, then the last (``fault``: how
        it ended; None when it succeeded, or failed inside the far engine)."""
        if not self.lost:
            return outcome
        last = Attempt(self.node, self.label, self.number, started, outcome.finished, fault,
                       outcome.error.message if fault and outcome.error else "",
                       work_lost_s=outcome.finished - started if fault else 0.0)
        return replace(outcome, attempts=(*self.lost, last, *outcome.attempts), started=self.first_started)


def far_arguments(request: ExecutionRequest, far_lock: str, far_output: str) -> list[str]:
    """``run --lock … --allow-drift=remote --executor local --output … --json`` and the
    request's own switches."""
    argv = ["run", "--lock", far_lock, "--allow-drift=remote", "--executor", "local",
            "--output", far_output, "--json"]
    if request.jobs > 1:
        argv += ["-j", str(request.jobs)]
    if not request.use_cache:
        argv.append("--no-cache")
    if request.refresh:
        argv.append("--refresh")
    return argv + recovery_arguments(request)


def set_aside(output: Path, attempt: int) -> None:
    """Keep a failed job's far run directory as ``remote-attempt-N`` (the next job needs an
    empty one)."""
    if output.exists():
        output.rename(output.with_name(f"{output.name}-attempt-{attempt}"))


def recovery_arguments(request: ExecutionRequest) -> list[str]:
    """The command line's recovery policy and the injections the far engine applies to its
    steps (docs/faults.md); none for a run that asked for neither."""
    argv: list[str] = []
    policy = request.context.recovery.retries
    if policy is not None:
        argv += [f"--retries={policy.max}", f"--retry-on={','.join(policy.on)}",
                 f"--retry-backoff={policy.backoff_s:g}"]
    return argv + [f"--inject={i.text}" for i in request.context.recovery.injections if i.fault in INJECTORS.step_kinds]


def job_policy(request: ExecutionRequest | ExecutionContext) -> RetryPolicy:
    """The recovery policy of the job as a whole: the command line's, else the root recipe's
    (of a request's context, or of a context alone: what ``cmx plan`` renders)."""
    context = request.context if isinstance(request, ExecutionRequest) else request
    return context.recovery.retries or context.plan.root.recipe.retries or NO_RETRIES


def scheduler_retries(request: ExecutionRequest | ExecutionContext,
                      classes: Sequence[FaultClass] = (FaultClass.NODE_LOST, FaultClass.PREEMPTED)) -> int:
    """How often the scheduler itself may rerun the job for ``classes``: the job policy's
    ``max`` when it names any of them, else 0 (exit code 2 is never among them)."""
    policy = job_policy(request)
    return policy.max if any(c in policy.on for c in classes) else 0


def _struck(kill: Injection | None, struck: WorkerKill | None, number: int) -> dict[str, Any]:
    """The injection fields of an attempt the kill struck and the scheduler did not rerun."""
    if kill is None or struck is None or number != 1:
        return {}
    return {"injected": kill.text, "injected_at": struck.struck_at}


class _Killer(Generic[H]):
    """:meth:`RemoteExecutor.kill_worker` in a thread beside the wait for the job."""

    def __init__(self, executor: RemoteExecutor[H], handle: H) -> None:
        self._executor, self._handle = executor, handle
        self._done: WorkerKill | None = None
        self._error: CmxError | None = None
        self._thread = threading.Thread(target=self._strike, daemon=True, name="cmx-kill-worker")
        self._thread.start()

    def _strike(self) -> None:
        try:
            self._done = self._executor.kill_worker(self._handle)
        except CmxError as exc:
            self._error = exc

    def result(self) -> WorkerKill:
        """What the kill did, once the job has ended; a CmxError when it could not strike."""
        self._thread.join()
        if self._error is not None:
            raise CmxError(f"--inject kill-worker: {self._error}")
        assert self._done is not None
        return self._done


# -- folding the far result back ----------------------------------------------------------

MACHINE_FACTS = ("host", "cpu", "memory", "gpus", "accelerator", "os")
"""The facts that describe the machine rather than the software on it."""


def with_host_machine(far: Mapping[str, Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """The far facts with the machine's own taken from this host (``runs_on_this_host``)."""
    merged = {k: v for k, v in far.items() if k not in MACHINE_FACTS}
    merged.update({k: host[k] for k in MACHINE_FACTS if k in host})
    return merged


def fold(job: RemoteJob, status: JobStatus, fetched: Fetched, started: float, executor: str,
         own_timing: bool = False) -> ExecutionOutcome:
    """The typed outcome of the far run, read from what it wrote; an error outcome saying
    how the job ended when it wrote no result. ``own_timing`` (a point of a batch: a job
    array, a batch of Ray tasks, an Indexed Job): the run's start and end are the far
    run's own, from its result, not the batch's submission and this fold."""
    out = job.local_output
    document = _read_json(out / "result.json")
    finished = time.time()
    if own_timing and isinstance(document, dict):
        started, finished = far_timing(document, started, finished)
    if not isinstance(document, dict) or status.state in ("timeout", "oom", "cancelled", "lost", "preempted"):
        why = _job_end(status)
        wrote = "without writing " + str(out / "result.json") if not isinstance(document, dict) else \
            "(its result is not trusted)"
        refused = far_refusal(fetched.logs) if not isinstance(document, dict) else None
        detail = f": the far side refused the plan: {refused}" if refused else \
            (f": {status.message}" if status.message else "")
        return ExecutionOutcome(nodes=(), root_outputs={}, started=started, finished=finished,
                                error=RunError(f"{executor} job {why} {wrote}{detail}",
                                               exit_code=2 if refused and status.exit_code == 2 else 1),
                                logs=fetched.logs, artifacts=fetched.artifacts, system=fetched.system)
    facts = _read_json(out / "facts.json")
    nodes = _nodes(_read_json(out / "nodes.json"), document, out)
    error = document.get("error")
    return ExecutionOutcome(
        nodes=nodes, root_outputs=dict(document.get("outputs") or {}), started=started, finished=finished,
        error=RunError(str(error.get("message")), error.get("node"), error.get("step"),
                       exit_code=_far_exit(document)) if error else None,
        facts=facts if isinstance(facts, dict) else None, system=fetched.system,
        artifacts=fetched.artifacts, logs=fetched.logs, telemetry=_far_telemetry(document, job),
        attempts=far_attempts(document), conditions=_far_conditions(document),
    )


def _far_conditions(document: Mapping[str, Any]) -> dict[str, Any] | None:
    """The far side's ``conditions`` section: its local executor measured the machine the
    steps ran on (a container's far side sees the host's /proc/stat and its own processes)."""
    section = document.get("conditions")
    return dict(section) if isinstance(section, dict) else None


def _far_exit(document: Mapping[str, Any]) -> int:
    """2 when the far run's last attempt refused its input (``bad_input``), else 1."""
    faults = [a.get("fault") for a in document.get("attempts") or ()]
    return 2 if faults and faults[-1] == FaultClass.BAD_INPUT else 1


def far_attempts(document: Mapping[str, Any]) -> tuple[Attempt, ...]:
    """The attempts the far engine recorded of its steps (``attempts`` of its result)."""
    found = []
    for item in document.get("attempts") or ():
        try:
            found.append(Attempt(str(item["node"]), str(item["step"]), int(item["number"]), float(item["started"]),
                                 float(item["ended"]), _fault_class(item.get("fault")), str(item.get("message") or ""),
                                 float(item.get("work_lost_s") or 0.0), item.get("injected"),
                                 item.get("injected_at"), bool(item.get("resumed"))))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(found)


def _fault_class(value: Any) -> FaultClass | None:
    """An attempt's ``fault`` as the far result wrote it (a ValueError when not a class)."""
    return FaultClass(value) if value is not None else None


def far_timing(document: Mapping[str, Any], started: float, finished: float) -> tuple[float, float]:
    """The far result's ``timing`` as epoch seconds; the given ones where it has none."""
    timing = document.get("timing")
    if not isinstance(timing, Mapping):
        return started, finished
    try:
        began = datetime.fromisoformat(str(timing["started_at"]).replace("Z", "+00:00")).timestamp()
        ended = datetime.fromisoformat(str(timing["finished_at"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, TypeError, ValueError):
        return started, finished
    return (began, ended) if ended >= began else (started, finished)


def _far_telemetry(document: Mapping[str, Any], job: RemoteJob) -> dict[str, Any] | None:
    """The far side's ``telemetry`` section (it sampled the machine the steps ran on), its
    series file named from this side's run directory."""
    section = document.get("telemetry")
    if not isinstance(section, dict):
        return None
    series = job.local_output / str(section.get("series", ""))
    try:
        shown = series.relative_to(job.request.run_dir).as_posix()
    except ValueError:
        shown = series.as_posix()
    return {**section, "series": shown}


FAR_ERROR = "cmx: error: "


def far_refusal(logs: Sequence[Path]) -> str | None:
    """The far ``cmx``'s own one-line error from the job's logs (the last one), e.g. a plan
    made with ``--facts`` for a node that lacks what it requires: "recipe X requires
    accelerator h100; this machine has: l4". None when the logs hold none."""
    found = None
    for log in logs:
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(FAR_ERROR):
                found = line[len(FAR_ERROR):].strip()[:500]
    return found


def _job_end(status: JobStatus) -> str:
    return {"completed": f"exited with code {status.exit_code}", "failed": f"failed with code {status.exit_code}",
            "timeout": "exceeded its time limit", "oom": "was killed for running out of memory",
            "cancelled": "was cancelled", "lost": "was lost", "preempted": "was preempted"}[status.state]


def _nodes(listed: Any, document: Mapping[str, Any], out: Path) -> tuple[NodeResult, ...]:
    """Per-node results from the far ``nodes.json``; the result part and artifacts go to
    the node that produced them (the last one, the root, runs last)."""
    rows = listed if isinstance(listed, list) else []
    part = part_of(document)
    artifacts = tuple(_artifacts(document, out))
    results = []
    for index, row in enumerate(rows):
        last = index == len(rows) - 1
        cached = row.get("cached_measurement")
        results.append(NodeResult(
            node_id=str(row["node_id"]), recipe=str(row.get("recipe", "")), status=row.get("status", "ran"),
            wall_s=float(row.get("wall_s", 0.0)), cache_key=str(row.get("cache_key", "")),
            parts=(part,) if part and last else (), artifacts=artifacts if last else (),
            cached_measurement=CachedMeasurement(**cached) if last and isinstance(cached, dict) else None,
        ))
    return tuple(results)


def part_of(document: Mapping[str, Any]) -> ResultPart | None:
    """The result part a far result document carries (None for a plain completed run with
    no metrics and no suite of its own)."""
    benchmark = dict(document.get("benchmark") or {})
    metrics = {str(k): Metric(v.get("value"), str(v.get("unit")), bool(v.get("higher_is_better")),
                              tuple(float(x) for x in v.get("samples") or ()))
               for k, v in dict(document.get("metrics") or {}).items()}
    sections = {k: v for k, v in document.items() if k not in ENGINE_KEYS}
    software = document.get("software") or {}
    extra = {k: software[k] for k in ("framework", "framework_version", "packages") if software.get(k)}
    if extra:
        sections["software"] = extra
    status = document.get("status")
    if status not in ("valid", "invalid", "partial", "completed"):
        return None  # an error result (its error travels in ExecutionOutcome.error)
    if (status == "completed" and not metrics and not sections
                             and benchmark.get("suite") in (None, "custom")):
        return None
    return ResultPart(status=status, benchmark={k: v for k, v in benchmark.items() if v is not None},
                      metrics=metrics, invalid_reasons=tuple(document.get("invalid_reasons") or ()),
                      sections=sections, notes=str(document.get("notes") or ""))


def _artifacts(document: Mapping[str, Any], out: Path) -> list[Artifact]:
    """The far artifacts as local paths: relative ones under the fetched run directory;
    absolute ones (the far cache) where they exist here too."""
    found = []
    for item in document.get("artifacts") or ():
        path = Path(str(item["path"]))
        local = path if path.is_absolute() else out / path
        if not local.is_file():
            raise CmxError(f"{out / 'result.json'}: artifact {path} did not come back from the far side; "
                           "the executor's fetch must bring it")
        found.append(Artifact(local, str(item.get("kind", "file"))))
    return found


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


__all__: Sequence[str] = ("Fetched", "JobStatus", "RemoteExecutor", "RemoteJob", "far_arguments", "fold", "job_policy",
                          "part_of", "scheduler_retries")
