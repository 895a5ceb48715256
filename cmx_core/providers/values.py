"""The values that flow out of a step: metrics with units, artifacts, result parts.

The bottom of the plugin contract (re-exported from :mod:`cmx_core.api`): plain frozen
dataclasses that import nothing from cmx-core, so every layer may use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
    """One measured value. ``unit`` is mandatory: cmx never invents or drops units.
    ``samples``: the values of the timed repetitions inside the run, in order, when it timed
    several (the ``value`` is what the step makes of them: the best, the median...); a
    comparison of two runs takes its noise band from them (docs/results.md)."""

    value: float | int | None
    unit: str
    higher_is_better: bool
    samples: tuple[float, ...] = ()


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


