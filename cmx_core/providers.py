"""Typed providers that plugins register, and the values that flow through them.

These dataclasses are cmx-core's public plugin API (re-exported from :mod:`cmx_core.api`).
A plugin registers providers from its registration hooks (see :mod:`cmx_core.hookspecs`);
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import argparse
    import logging

    from cmx_core.facts import FactStore
    from cmx_core.planner import Plan
    from cmx_core.plugins import Registry

Status = Literal["valid", "invalid", "error", "partial", "completed"]
"""Result status. ``valid``/``invalid`` are the suite's own verdict; ``completed`` means
the run finished and the suite has no validity concept (a plain recipe)."""


@dataclass(frozen=True)
class Capabilities:
    """What a provider needs from the machine; shown by ``cmx plugins`` and checked in plans."""

    needs_docker: bool = False
    needs_gpu: bool = False
    needs_network: bool = False
    needs_root: bool = False
    runs_untrusted_code: bool = False

    def names(self) -> list[str]:
        """The names of the capabilities that are set, e.g. ``['needs_docker']``."""
        return [name for name, value in self.__dict__.items() if value]


@dataclass(frozen=True)
class Metric:
    """One measured value. ``unit`` is mandatory: cmx never invents or drops units."""

    value: float | int | None
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Artifact:
    """A file a step produced that belongs to the result (its sha256 is added by cmx)."""

    path: Path
    kind: str


@dataclass(frozen=True)
class ResultPart:
    """What a benchmark step contributes to the run's normalized result document.

    ``benchmark`` holds suite, task, scenario, mode, division, ``primary_metric`` (a key of
    ``metrics``) and similar keys of the result schema's ``benchmark`` object. ``sections``
    holds suite-specific top-level objects of the schema, such as ``{"mlperf": {...}}`` or
    ``{"model": {...}}``.
    """

    status: Status
    benchmark: Mapping[str, Any]
    metrics: Mapping[str, Metric] = field(default_factory=dict)
    invalid_reasons: tuple[str, ...] = ()
    sections: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""


@dataclass(frozen=True)
class StepOutput:
    """What a step returns: its outputs (only the recipe's declared ones are kept),
    optionally a result part and artifacts. A step may also return a plain mapping,
    which is taken as ``outputs``."""

    outputs: Mapping[str, Any] = field(default_factory=dict)
    result: ResultPart | None = None
    artifacts: tuple[Artifact, ...] = ()


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


def _step_logger() -> logging.Logger:
    """A logger that imports :mod:`logging` only when a step actually logs."""
    return _LazyLogger()  # type: ignore[return-value]


class _LazyLogger:
    def __getattr__(self, name: str) -> Any:
        import logging

        return getattr(logging.getLogger("cmx.step"), name)


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
    naming the executor and the key (:func:`cmx_core.settings.parse_settings`).

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
class ExecutionRequest:
    """What an executor is asked to run: a resolved plan and everything it needs.

    ``plan`` is the resolved :class:`cmx_core.planner.Plan`; ``facts`` the
    :class:`cmx_core.facts.FactStore` the plan was resolved against; ``registry`` the loaded
    plugins. ``lock_path`` is the run's ``lock.json``, already written (a remote executor
    ships it and runs ``cmx run --lock`` on the far side). ``settings`` is an instance of
    the executor's own :class:`ExecutorSettings` subclass, already validated.
    """

    plan: Plan
    facts: FactStore
    registry: Registry
    run_dir: Path
    lock_path: Path
    run_id: str
    settings: ExecutorSettings = field(default_factory=NoSettings)
    jobs: int = 1
    use_cache: bool = True
    refresh: bool = False


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

    def result_part(self) -> ResultPart | None:
        """The result part of the run: the one part, or all parts merged by section
        (:func:`cmx_core.plugin_parts.merge_parts`); parts that disagree are a ResultsError."""
        parts = [(node.node_id, part) for node in self.nodes for part in node.parts]
        if len(parts) <= 1:
            return parts[0][1] if parts else None
        from cmx_core.plugin_parts import merge_parts

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
class Executor:
    """Runs a plan somewhere: the local machine (built in), a container, Slurm, Ray...

    ``run`` gets a typed :class:`ExecutionRequest` and returns an :class:`ExecutionOutcome`;
    it never writes ``result.json`` itself. A step failure is reported in
    ``ExecutionOutcome.error`` (the engine records an error result); a failure of the
    executor itself (an image that does not build, a job that never starts) is raised as a
    :class:`cmx_core.errors.CmxError` and recorded as an error result too. ``settings`` is the
    executor's :class:`ExecutorSettings` subclass. Remote executors derive from
    :class:`cmx_core.remote.RemoteExecutor`, which implements ``run``. ``check_plan``
    (optional) is called by ``cmx plan`` and before a run starts, and raises a CmxError for
    what would make the run fail on its input (an unknown container template, say).
    ``describe`` (optional) says, for ``cmx plan``, how the plan would run: for a container
    the image tag, the GPUs requested, the mounts, the network and the limits.

    ``run_many`` (optional) runs many prepared requests as one batch (a Slurm job array, Ray
    tasks over one connection): ``cmx sweep`` calls it once with every point's request (each
    with its own run directory, lock and run id, all with the same settings) and the sweep's
    ``-j`` as the most points to run at once, and records each outcome as ``run`` would be.
    It returns one :class:`ExecutionOutcome` per request, in order; a failed point is an
    outcome with ``error``, not an exception. It raises a :class:`cmx_core.errors.CmxError`
    only when the batch as a whole cannot run (every point is then an error result), and
    :class:`cmx_core.errors.Interrupted` after cancelling what it started on Ctrl-C. Without
    it, a sweep runs one ``cmx run`` process per point.
    """

    name: str
    summary: str
    run: Callable[[ExecutionRequest], ExecutionOutcome]
    settings: type[ExecutorSettings] = NoSettings
    check_plan: Callable[[Plan, ExecutorSettings], None] | None = None
    describe: Callable[[Plan, ExecutorSettings], Mapping[str, Any]] | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    run_many: Callable[[Sequence[ExecutionRequest], int], tuple[ExecutionOutcome, ...]] | None = None
    version: str = ""
    plugin: str = ""


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
