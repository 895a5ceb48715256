"""What a run is asked to do, as one typed value: the CLI, ``cmx sweep`` and ``api.run``
build a :class:`RunRequest` and hand it to :func:`cmx_core.run.engine.run`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.errors import UsageError
from cmx_core.providers.recovery import NO_RECOVERY, Recovery

if TYPE_CHECKING:
    from cmx_core.plan.planner import Plan
    from cmx_core.telemetry.collector import TelemetrySettings


@dataclass(frozen=True)
class ExecutorChoice:
    """The executor asked for (None: ``docker`` when the recipe declares a container, else
    ``local``) and its settings as given (``--executor-opt``), not yet checked."""

    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


DEFAULT_EXECUTOR = ExecutorChoice()


@dataclass(frozen=True)
class RunRequest:
    """One ``cmx run``: the query, where recipes and facts come from, how to run it and
    what to record. Checked when built (``jobs`` at least 1).

    ``lock`` replays a lockfile's query and refuses drift (``allow_drift`` names the classes
    of drift allowed: ``remote`` for the far side of a remote executor). ``sweep``
    (``{"id", "index", "point"}``) marks the run as one point of a ``cmx sweep``.
    ``telemetry`` says how the run is sampled (None: from the environment,
    docs/telemetry.md); ``recovery`` is the recovery policy and the faults to inject
    (docs/faults.md); ``planned`` is the plan of ``tags`` and ``inputs`` already made and
    checked (:mod:`cmx_core.plan.handoff`), run instead of resolving it again."""

    tags: str | Sequence[str] = ()
    inputs: Mapping[str, Any] | None = None
    recipes_dirs: Sequence[str | Path] = ()
    facts_file: str | Path | None = None
    jobs: int = 1
    use_cache: bool = True
    refresh: bool = False
    output: str | Path | None = None
    executor: str | None = None
    options: Mapping[str, Any] | None = None
    lock: str | Path | None = None
    allow_drift: Sequence[str] = ()
    sweep: Mapping[str, Any] | None = None
    telemetry: TelemetrySettings | None = None
    recovery: Recovery = NO_RECOVERY
    planned: Plan | None = None

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise UsageError(f"-j must be at least 1, got {self.jobs}")

    @property
    def choice(self) -> ExecutorChoice:
        """The executor asked for, with its options."""
        return ExecutorChoice(self.executor, dict(self.options or {}))
