"""What ``cmx sweep`` is asked to do (:class:`SweepRequest`) and how this process drives
its points (:class:`Driver`), as typed values for :mod:`cmx_core.sweep.runner`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.sweep.batch import Planned, PointOutcome

POLL_S = 0.2
"""How often the driver reads a watched point's live series (:class:`Live`)."""

OnPoint = Callable[[PointOutcome, int], None]
"""Told of each point as it ends, with the number of points."""


@dataclass(frozen=True)
class SweepRequest:
    """One sweep: the query (``tags``, ``base_inputs``) at every point of ``matrix``, its
    data directory, the ``cmx run`` options of every point (``run_options``) and of some
    (``point_options``: a chaos file's ``--inject``s; they run one process per point),
    ``jobs`` points at once, on ``executor``. ``batch=False`` runs one ``cmx run`` process
    per point even where the executor has a batch entry (to compare the two paths).
    Checked when built: ``jobs`` at least 1, no input that is also a matrix axis."""

    tags: str
    base_inputs: Mapping[str, str]
    matrix: Sequence[dict[str, str]]
    data_dir: Path
    run_options: Sequence[str] = ()
    jobs: int = 1
    executor: str | None = None
    batch: bool = True
    point_options: Mapping[int, Sequence[str]] | None = None

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise UsageError(f"-j must be at least 1, got {self.jobs}")
        overlap = sorted(set(self.base_inputs) & {k for p in self.matrix[:1] for k in p})
        if overlap:
            raise UsageError(f"cmx sweep: {', '.join(overlap)} is both an input and a --matrix axis; give it once")


@dataclass(frozen=True)
class Driver:
    """How this process runs a sweep's points: who is told of each as it ends
    (``on_point``), the points' process environment (``env``; None: this one's), whether
    an executor's batch entry may take them all at once (``batch``), the plans already
    made (``planned``), and more ``cmx run`` options for some points."""

    on_point: OnPoint | None = None
    env: Mapping[str, str] | None = None
    batch: bool = True
    planned: Planned | None = None
    point_options: Mapping[int, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Live:
    """A point watched while it runs: its run appends its application values to ``journal``
    (``CMX_APP_JOURNAL``), and ``poll``, called every fraction of a second, returns a reason
    to stop it now ("" to let it run)."""

    journal: Path
    poll: Callable[[], str]
