"""Typed providers that plugins register, and the values that flow through them.

These dataclasses are cmx-core's public plugin API (re-exported from :mod:`cmx_core.api`).
A plugin registers providers from its registration hooks (see :mod:`cmx_core.plugins.hookspecs`);
``cmx plugins`` lists and validates them without running anything.

Example, a step type in a plugin::

    from cmx_core.api import StepType, StepContext, StepOutput, hookimpl

    def _hello(ctx: StepContext) -> StepOutput:
        return StepOutput(outputs={"greeting": f"hello {ctx.params['who']}"})

    @hookimpl
    def cmx_register_steps(register):
        register(StepType(name="demo.hello", summary="Say hello", run=_hello))
"""


from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cmx_core.datautil import atomic_write
from cmx_core.errors import UsageError
from cmx_core.providers.attempts import Attempt
from cmx_core.providers.parts import merge_parts
from cmx_core.providers.table import ProviderTable  # noqa: F401 - re-exported
from cmx_core.providers.values import Artifact, Capabilities, ResultPart, StepOutput

if TYPE_CHECKING:
    import argparse
    import logging

class MetricsSink(Protocol):
    """Where a step's own series go (:meth:`StepContext.report`); the run's telemetry
    provides one per step (:class:`cmx_core.telemetry.appmetrics.StepMetrics`)."""

    metrics_file: Path | None

    def report(self, name: str, value: float, kind: str = "gauge", labels: dict[str, str] | None = None) -> None: ...


class NoMetrics:
    """The sink of a step that runs without telemetry (``--no-telemetry``): nothing is kept."""

    metrics_file: Path | None = None

    def report(self, name: str, value: float, kind: str = "gauge", labels: dict[str, str] | None = None) -> None:
        pass


@dataclass(frozen=True)
class StepContext:
    """The immutable snapshot a step runs with.

    ``params`` are the step's rendered ``with:`` values; ``inputs`` the recipe's typed inputs;
    ``deps`` maps each dep alias to that dep's declared outputs; ``facts`` are the detected
    facts. All mappings are read-only (nested values too). ``work_dir`` is the step's own
    directory (inside the cache entry being staged when the node is cached, else inside the
    run directory); ``log_dir`` is where captured stdout/stderr go.
    """

    node_id: str
    recipe: str
    params: Mapping[str, Any]
    inputs: Mapping[str, Any]
    deps: Mapping[str, Mapping[str, Any]]
    facts: Mapping[str, Any]
    variations: Mapping[str, Any]
    work_dir: Path
    log_dir: Path
    run_dir: Path
    cache_dir: Path
    timeout_s: float | None = None
    log: logging.Logger = field(default_factory=lambda: _step_logger())
    recipe_dir: Path | None = None
    """The directory of the recipe file: a python step imports a module kept there without
    ``PYTHONPATH``."""
    metrics: MetricsSink = field(default_factory=NoMetrics)
    """The application metrics channel (docs/telemetry.md): :meth:`report` writes to it and
    ``metrics.metrics_file`` is the file a shell step's ``CMX_METRICS_FILE`` names."""
    measures: bool = False
    """The step is the measurement (its recipe says ``measures: true``, or its type declares
    ``measures=True``): a ``shell`` step's declared metrics then make the run ``valid``."""
    checkpoint_dir: Path | None = None
    """The step's checkpoint directory (``checkpoint:`` in its recipe): kept across its
    attempts, empty on the first (docs/faults.md)."""
    attempt: int = 1
    """Which attempt of the step this is (1, then 2... when its recovery policy retries it)."""
    launchers: Mapping[str, Launcher] = field(default_factory=dict)
    """The registered launchers by name (``cmx_register_launchers``): a step whose ranks
    start under a launcher (``launcher: torchrun``) looks it up here."""
    detector_plugins: frozenset[str] = frozenset()
    """The loaded plugins that provide detectors (``cmx-core`` among them): what a step that
    builds an environment to detect the same facts in (``docker.build``) installs there."""

    def save_checkpoint(self, name: str, data: bytes | str) -> Path:
        """Write one checkpoint file atomically (readers see the old file or the new one)."""
        if self.checkpoint_dir is None:
            raise UsageError(f"{self.recipe}: the step declares no checkpoint: (add checkpoint: true)")
        target = self.checkpoint_dir / name
        atomic_write(target, data)
        return target

    def report(self, name: str, value: float, kind: str = "gauge", labels: dict[str, str] | None = None) -> None:
        """Report the step's own series ``cmx_app_<name>`` (a gauge, or ``kind="counter"``
        for a running total), e.g. ``ctx.report("completed_queries", 120)``; ``labels`` tell
        series of one name apart (``labels={"rank": "1"}``)."""
        if labels:
            self.metrics.report(name, value, kind, labels)
        else:  # a sink written before labels (a plugin's test double) takes three arguments
            self.metrics.report(name, value, kind)


def _step_logger() -> logging.Logger:
    """A logger that imports :mod:`logging` only when a step actually logs."""
    return _LazyLogger()  # type: ignore[return-value]


class _LazyLogger:
    def __getattr__(self, name: str) -> Any:
        return getattr(logging.getLogger("cmx.step"), name)


@dataclass(frozen=True)
class ConditionalDep:
    """A dependency that a step runs itself, decided when its turn comes at run time (a CM
    script's ``prehook_deps``, or a dep whose ``skip_if_env`` reads a key that ``customize.py``
    sets): not a node of the plan, so ``cmx plan`` and ``cmx explain`` list it as conditional.

    ``stage`` is when its turn comes (``deps``, ``prehook_deps``, ``posthook_deps``,
    ``post_deps``), ``tags`` what it selects, ``condition`` the rule decided then, in words
    (``""``: none, it always runs at its turn)."""

    stage: str
    tags: str
    condition: str = ""
    alias: str = ""

    def describe(self) -> str:
        name = f"{self.alias}: " if self.alias else ""
        rule = f"if {self.condition}" if self.condition else "always, at its turn"
        return f"{name}{self.tags} ({self.stage}; decided at run time: {rule})"

    def to_json(self) -> dict[str, str]:
        return {"stage": self.stage, "tags": self.tags, "condition": self.condition, "alias": self.alias}


@dataclass(frozen=True)
class StepType:
    """A step type recipes can ``use:``.

    ``run`` takes a :class:`StepContext` and returns a :class:`StepOutput` or a mapping of
    outputs; it raises :class:`cmx_core.errors.StepFailed` for a failure the user should see
    as one line. ``params`` documents the accepted ``with:`` keys (name -> description); when
    it is not empty, unknown keys in a recipe are refused at plan time. ``validate`` (optional)
    checks a cache hit's outputs still hold (return False to rebuild). ``version`` is filled
    by cmx with the providing distribution's version and feeds every cache key.

    ``measures`` says the step is a measurement (a benchmark) rather than a producer (a
    build, a detection, a download): a node with a measuring step is never served from the
    cache unless its recipe says ``cache: {measurements: true}``, and then the cache entry
    keeps the whole result part and the new result is labelled as a cached measurement.
    ``params_schema`` (optional) is the JSON Schema of the rendered ``with:`` mapping; the
    plan checks every step's literal arguments against it, so ``cmx plan`` fails where the
    run would. ``examples`` are sample ``with:`` mappings (documentation the conformance kit
    checks against ``params`` and ``params_schema``). ``extras`` names the distribution
    extras the step needs (``("llm",)`` for ``cmx-mlperf[llm]``): the plan checks that
    their requirements are installed and names the install command when they are not.
    """

    name: str
    summary: str
    run: Callable[[StepContext], StepOutput | Mapping[str, Any]]
    params: Mapping[str, str] = field(default_factory=dict)
    capabilities: Capabilities = field(default_factory=Capabilities)
    validate: Callable[[Mapping[str, Any]], bool] | None = None
    version: str = ""
    plugin: str = ""
    measures: bool = False
    params_schema: Mapping[str, Any] | None = None
    examples: tuple[Mapping[str, Any], ...] = ()
    extras: tuple[str, ...] = ()
    extras_for: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    """The extras a step needs for its literal ``with:`` values (a SUT chosen by name), beyond
    ``extras``: called when the plan is made, with the step's unrendered ``with:`` mapping."""
    check_plan: Callable[[Mapping[str, Any], Path], tuple[str, str] | None] | None = None
    """A plan-time check of a step's unrendered ``with:`` (and its recipe's directory) that
    must run none of the step's code: ``(with key, problem)`` for what the run would refuse
    (the ``python`` step's missing function), else None."""
    conditional_deps: Callable[[Mapping[str, Any]], Sequence[ConditionalDep]] | None = None
    """The deps the step itself runs, each decided at run time, from its unrendered ``with:``
    (cmx-cm's hooks): ``cmx plan`` and ``cmx explain`` show them as conditional."""
    env_input: str = ""
    """The input that takes the command line's ``--env.KEY=VALUE`` arguments, as a JSON object,
    on a recipe run with a step of this type (cmx-cm's ``cm_env``: CM's env habit); empty: the
    step type takes none, and ``--env.`` is refused for its recipes."""


@dataclass(frozen=True)
class Detector:
    """Produces one top-level fact (``facts.<name>``), e.g. ``os``, ``cpu``, ``gpus``.

    ``detect`` returns JSON-serialisable data (a dataclass is converted with ``asdict``) and
    must never raise for missing hardware: no GPU is an empty list with a reason. Results are
    cached for ``ttl_s`` seconds (None: for the process only) and invalidated when
    ``fingerprint()`` (e.g. a driver version or a binary's path/size/mtime) changes.
    ``check(value, where)`` (optional) validates a value a recipe's ``requires`` compares
    with this fact (e.g. a known accelerator tag) and raises a CmxError naming ``where``.
    ``returns`` (optional) is the JSON type of the fact (``dict``, ``list``, ``str``...): the
    conformance kit calls ``detect`` and checks its value has that type.
    """

    name: str
    summary: str
    detect: Callable[[], Any]
    fingerprint: Callable[[], str] | None = None
    ttl_s: float | None = None
    check: Callable[[Any, str], Any] | None = None
    returns: type | tuple[type, ...] | None = None
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class ExecutorSettings:
    """Base class of an executor's typed settings (Snakemake's ``ExecutorSettingsBase``).

    An executor declares a frozen dataclass deriving from this one; each field is one
    ``--executor-opt KEY=VALUE``, converted to the field's type (``str``, ``int``,
    ``float``, ``bool``, a ``Literal`` of choices, ``X | None``, ``tuple[str, ...]`` from a
    comma list). The help ``cmx plugins info`` shows comes from the field's
    ``metadata={"help": ...}``. An unknown key or a bad value is a one-line usage error
    naming the executor and the key (:func:`cmx_core.run.settings.parse_settings`).

    Example::

        @dataclass(frozen=True)
        class SlurmSettings(ExecutorSettings):
            partition: str | None = field(default=None, metadata={"help": "sbatch --partition"})
            poll_s: float = field(default=5.0, metadata={"help": "seconds between squeue polls"})
    """


@dataclass(frozen=True)
class NoSettings(ExecutorSettings):
    """The settings of an executor that takes none."""


@dataclass(frozen=True)
class CachedMeasurement:
    """Where a measurement served from the cache was really taken: the run that measured it
    and when. A result built from it says so (``provenance.cached_measurement``)."""

    run_id: str
    measured_at: str
    cache_key: str


NodeStatus = Literal["ran", "cached", "failed"]


@dataclass(frozen=True)
class NodeResult:
    """What happened to one plan node."""

    node_id: str
    recipe: str
    status: NodeStatus
    wall_s: float
    cache_key: str
    outputs: Mapping[str, Any] = field(default_factory=dict)
    parts: tuple[ResultPart, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    cached_measurement: CachedMeasurement | None = None


@dataclass(frozen=True)
class RunError:
    """Why a run failed: a message and, when a step failed, the node and step.
    ``exit_code`` is what ``cmx run`` exits with: 1 for a failed run, 2 when the run
    refused its input."""

    message: str
    node: str | None = None
    step: str | None = None
    exit_code: int = 1
    cause: str | None = None
    """What killed the step when its own evidence shows it (``oom``, ``cuda_oom``, ``nccl``,
    ``segfault``, ``xid``, ``time_limit``, ``disk_full``, ``killed``, ``terminated``:
    docs/telemetry.md)."""
    evidence: tuple[str, ...] = ()
    """The log lines (or the exit signal, the cgroup's OOM kills) that show the cause."""
    signal: str | None = None
    """The signal that ended the step's process (``SIGKILL``), with a cause."""
    rank: int | None = None
    """The training rank whose loss ended the step, with a cause."""


@dataclass(frozen=True)
class ExecutionOutcome:
    """What an executor returns; the engine alone builds, validates, writes and indexes the
    result document from it.

    ``nodes`` are in plan order (only those that ran or were served). ``facts`` is the
    snapshot of the machine the plan ran on when that is not this one (a remote executor
    fills it from the far side; None means the request's own facts). ``system`` holds
    extra ``system`` keys the executor knows (a container's image record); ``logs`` are
    files worth keeping (kept as artifacts of kind ``log``).
    """

    nodes: tuple[NodeResult, ...]
    root_outputs: Mapping[str, Any]
    started: float
    finished: float
    error: RunError | None = None
    facts: Mapping[str, Any] | None = None
    system: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()
    logs: tuple[Path, ...] = ()
    telemetry: Mapping[str, Any] | None = None
    """The run sampler's ``telemetry`` section (added by the engine, docs/telemetry.md)."""
    attempts: tuple[Attempt, ...] = ()
    """Every attempt of every step that was retried or failed (docs/faults.md)."""
    conditions: Mapping[str, Any] | None = None
    """A far side's ``conditions`` section (the machine its steps ran on, docs/busy-machine.md)."""
    queued_s: float | None = None
    """Seconds the run waited in a scheduler's queue before its first attempt started
    (``timing.queue_s``; ``started`` is then that attempt's start, so the wall time is the run's own)."""

    def result_part(self) -> ResultPart | None:
        """The result part of the run: the one part, or all parts merged by section
        (:func:`cmx_core.providers.parts.merge_parts`); parts that disagree are a ResultsError."""
        parts = [(node.node_id, part) for node in self.nodes for part in node.parts]
        if len(parts) <= 1:
            return parts[0][1] if parts else None
        return merge_parts(parts)

    def cached_measurement(self) -> CachedMeasurement | None:
        """The cache provenance of the node whose result part is the run's."""
        for node in reversed(self.nodes):
            if node.parts:
                return node.cached_measurement
        return None

    def all_artifacts(self) -> list[Artifact]:
        return [a for node in self.nodes for a in node.artifacts] + list(self.artifacts)


@dataclass(frozen=True)
class Suite:
    """A benchmark suite a plugin provides, and the JSON Schema of its result section.

    ``name`` is the value of ``benchmark.suite`` (``mlperf-inference``); ``section`` the
    top-level key of the result document the suite owns (``mlperf``); ``schema`` the JSON
    Schema of that section (checked when the suite is registered, then composed into the
    result validator). ``required_for`` lists the statuses for which a result of this suite
    must carry its section.

    Example::

        register(Suite(name="helm", summary="HELM scenarios", section="helm",
                       schema={"type": "object", "required": ["scenario"],
                               "properties": {"scenario": {"type": "string"}}}))
    """

    name: str
    summary: str
    section: str
    schema: Mapping[str, Any]
    required_for: tuple[str, ...] = ("valid", "invalid")
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class Command:
    """A ``cmx`` subcommand added by a plugin.

    ``configure`` adds arguments to its argparse parser; ``run`` gets the parsed namespace and
    returns the exit code. ``--json`` is added for you; honour it by printing one JSON document.
    The namespace's ``cmx_registry`` is the loaded plugin registry (``cmx_core.api.Registry``),
    handed to a command that reaches other providers (``cmx detect`` runs every plugin's
    detectors): a plugin never asks for a process-wide one.
    """

    name: str
    summary: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class Exporter:
    """A ``cmx results export --format NAME`` format.

    ``export`` gets the selected result documents (each with its run directory under the
    key ``"_run_dir"`` removed before validation: pass ``run_dirs`` instead) and writes into
    ``dest``. It raises a :class:`cmx_core.errors.CmxError` for bad input.
    """

    name: str
    summary: str
    export: Callable[[list[Mapping[str, Any]], list[Path], Path], None]
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class RankLayout:
    """Where the ranks of one distributed run are, as the executor placed its nodes: ``nodes``
    nodes of ``procs_per_node`` processes each, this node being ``node_rank``; the rank-0
    host and port every rank meets at; ``job_id`` names the rendezvous; ``env`` is the
    environment the executor gave this node (Slurm's ``RANK``/``SLURM_*``, a Kubernetes
    pod's ``CMX_NODE_RANK``), read by a launcher whose ranks the executor started itself."""

    nodes: int = 1
    procs_per_node: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    node_rank: int = 0
    job_id: str = "cmx"
    rdzv_timeout_s: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    """How often a launcher that can (torchrun's ``--max-restarts``) starts the node's ranks
    again after one failed."""

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


@dataclass(frozen=True)
class NodeCommand:
    """What one node runs: ``argv`` (no shell), the variables added to its environment, and
    a line saying how its ranks meet (``rendezvous``, recorded with the result)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    rendezvous: str = "none"


@dataclass(frozen=True)
class Launcher:
    """How the ranks of one run start on a node (ReFrame's launcher, beside its scheduler):
    the axis separate from the executor, which decides *where* the nodes are. Any executor
    composes any launcher: the executor gives the :class:`RankLayout`, the launcher turns a
    command into what each node runs.

    ``wrap(command, layout)`` takes the command of one rank, interpreter first (``python
    -m pkg.worker ARGS``), and returns the :class:`NodeCommand` of this node: ``torchrun``
    puts ``-m torch.distributed.run`` with its rendezvous options before the module,
    ``mpirun`` puts ``mpirun -np N`` before the command, ``env`` leaves it as it is (the
    executor started one task per rank). It raises :class:`cmx_core.errors.UsageError` for a
    layout it cannot run (``mpirun`` over several nodes, a missing ``mpirun``).
    Registered with ``cmx_register_launchers``; a step names one (``launcher: torchrun``) and
    finds it in :attr:`StepContext.launchers`."""

    name: str
    summary: str
    wrap: Callable[[Sequence[str], RankLayout], NodeCommand]
    capabilities: Capabilities = field(default_factory=Capabilities)
    multi_node: bool = True
    """False when one launch covers one node only (``mpirun`` here, ``none``)."""
    version: str = ""
    plugin: str = ""
