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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import argparse
    import logging

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
    """

    name: str
    summary: str
    run: Callable[[StepContext], StepOutput | Mapping[str, Any]]
    params: Mapping[str, str] = field(default_factory=dict)
    capabilities: Capabilities = field(default_factory=Capabilities)
    validate: Callable[[Mapping[str, Any]], bool] | None = None
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class Detector:
    """Produces one top-level fact (``facts.<name>``), e.g. ``os``, ``cpu``, ``gpus``.

    ``detect`` returns JSON-serialisable data (a dataclass is converted with ``asdict``) and
    must never raise for missing hardware: no GPU is an empty list with a reason. Results are
    cached for ``ttl_s`` seconds (None: for the process only) and invalidated when
    ``fingerprint()`` (e.g. a driver version or a binary's path/size/mtime) changes.
    ``check(value, where)`` (optional) validates a value a recipe's ``requires`` compares
    with this fact (e.g. a known accelerator tag) and raises a CmxError naming ``where``.
    """

    name: str
    summary: str
    detect: Callable[[], Any]
    fingerprint: Callable[[], str] | None = None
    ttl_s: float | None = None
    check: Callable[[Any, str], Any] | None = None
    version: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class ExecutionRequest:
    """What an executor is asked to run: a resolved plan and how to run it.

    ``options`` holds the user's executor options (``--executor-opt KEY=VALUE``) plus these
    keys the engine fills, which users cannot set: ``facts`` (the FactStore), ``session``,
    ``run_id`` and ``lock_digest``."""

    plan: Any  # cmx_core.planner.Plan; typed loosely to keep this module import-light
    run_dir: Path
    jobs: int = 1
    use_cache: bool = True
    refresh: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Executor:
    """Runs a plan somewhere: the local machine (built in), a container, Slurm, Ray...

    ``run`` returns the path of the ``result.json`` it produced (already validated); the
    engine indexes it in the host's results store.
    """

    name: str
    summary: str
    run: Callable[[ExecutionRequest], Path]
    capabilities: Capabilities = field(default_factory=Capabilities)
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
