"""Compare the metrics of several runs side by side against the first one (the baseline).

A metric is compared only when both runs report it with the same unit and direction;
otherwise it is flagged, never converted or guessed.

Each column is a *distribution*: one run, or several repeats of the same run
(:func:`compare_samples`). A column of repeats shows its median, and a difference counts
as real only beyond the noise, as asv does: when the two columns' ranges (min..max) overlap,
or the single value of one lies inside the other's range, the verdict is ``within noise``.
With one sample on each side the noise is unknown, and the cell says so (``1 sample, noise
unknown``) next to its naive better/worse.

Like configurations only (issue 53 item 1): a column is compared with the first column of its
*series*, the columns of the same configuration (the inputs and variations it was asked for,
:func:`config_of`) on the same hardware class. The baseline's series is compared with the
baseline; a column of another configuration or hardware class that comes first in its series
is that series' reference (verdict ``other series``: its value and band, never better or worse),
and the later columns of its series are compared with it. ``across`` names what may differ
inside one series instead (configuration keys, or ``hardware``): what the user compares on
purpose, e.g. two variations of one recipe; a column compared across hardware classes carries
a warning naming both.

Like with like (issue 43 item 4): where a column's conditions differ from the baseline's
beyond their bounds, or both were measured beyond a noise bound
(:mod:`cmx_core.results.like_with_like`), a cell that would be ``better`` or ``worse`` is
``inconclusive`` and its noise note names the condition. A column whose results (or the
baseline's) recorded no conditions is judged as before; its ``conditions`` says so.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from cmx_core.errors import ResultsError, UsageError
from cmx_core.results.hardware import of_document
from cmx_core.results.like_with_like import Likeness, compare_sides, speed_bound
from cmx_core.results.numbers import fmt_number

Verdict = Literal["baseline", "better", "worse", "same", "within noise", "inconclusive", "missing",
                  "units differ", "direction differs", "input", "other series"]

HARDWARE = "hardware"
"""The ``across`` name that lets columns of different hardware classes share one series."""

NOISE_UNKNOWN = "1 sample, noise unknown"


@dataclass(frozen=True)
class Samples:
    """The values of one metric over a column's repeats (``None`` values left out)."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def spread(self) -> float | None:
        """max - min of the repeats; None for one sample (noise unknown)."""
        return self.high - self.low if self.n > 1 else None


@dataclass(frozen=True)
class Cell:
    """One run's value of a metric, and how it compares with the baseline's."""

    value: float | int | None
    unit: str | None
    verdict: Verdict
    delta: float | None = None
    delta_pct: float | None = None
    samples: int = 1
    low: float | None = None
    high: float | None = None
    noise: str | None = None
    """How the noise was judged: ``1 sample, noise unknown``, or the ranges compared."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MetricRow:
    name: str
    higher_is_better: bool | None
    cells: tuple[Cell, ...]

    @property
    def units_differ(self) -> bool:
        return any(c.verdict == "units differ" for c in self.cells)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "higher_is_better": self.higher_is_better,
            "units_differ": self.units_differ,
            "cells": [c.to_json() for c in self.cells],
        }


@dataclass(frozen=True)
class RunColumn:
    """One column: its first run, and the run ids of all its repeats (itself included)."""

    run_id: str
    recipe: str
    status: str
    created_at: str
    task: str
    hardware_class: str = ""
    hardware_label: str = ""
    repeats: tuple[str, ...] = ()
    conditions: Likeness | None = None
    """Its conditions against its reference's (None for the baseline and a series' reference)."""
    against: str | None = None
    """The run its cells are compared with: the baseline, or its series' reference (None for those)."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """The inputs and variations its run was asked for (``provenance.query``): configuration."""


@dataclass(frozen=True)
class Comparison:
    runs: tuple[RunColumn, ...]
    metrics: tuple[MetricRow, ...]
    warnings: tuple[str, ...] = ()
    across: tuple[str, ...] = ()
    """What the runs were compared across on purpose (``--across``); nothing else differs within a series."""

    @property
    def axes(self) -> tuple[str, ...]:
        """The inputs and variations whose values differ between the columns: what changed, the
        configuration the runs are compared across (never itself better or worse)."""
        return axes_of([r.config for r in self.runs])

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.runs[0].run_id,
            "axes": list(self.axes),
            "across": list(self.across),
            "runs": [{**r.__dict__, "repeats": list(r.repeats), "config": dict(r.config),
                      "conditions": r.conditions.to_json() if r.conditions else None} for r in self.runs],
            "hardware_classes": _hardware_groups(self.runs),
            "warnings": list(self.warnings),
            "metrics": [m.to_json() for m in self.metrics],
        }


def compare_documents(documents: Sequence[Mapping[str, Any]], across: Sequence[str] = ()) -> Comparison:
    """Compare validated result documents, one run per column; the first is the baseline."""
    return compare_samples([[d] for d in documents], across)


def compare_samples(columns: Sequence[Sequence[Mapping[str, Any]]], across: Sequence[str] = ()) -> Comparison:
    """Compare columns of repeats (each a non-empty list of documents of the same run); the
    first column is the baseline, each other column is compared with its series' reference
    (:func:`references`)."""
    if len(columns) < 2:
        raise ResultsError("compare needs at least two runs (the first is the baseline)")
    if any(not column for column in columns):
        raise ResultsError("compare: every column needs at least one run")
    check_across(across, columns)
    refs = references(columns, across)
    likeness = tuple(None if ref is None else compare_sides(columns[ref], c, ("the baseline", "this run"))
                     for c, ref in zip(columns, refs, strict=True))
    runs = tuple(replace(_column(c), conditions=k, against=None if ref is None else columns[ref][0]["run_id"])
                 for c, k, ref in zip(columns, likeness, refs, strict=True))
    documents = [d for column in columns for d in column]
    axes = axes_of([config_of(c[0]) for c in columns])
    series = _Series(refs, likeness, tuple(_series_note(columns[0], c, axes) for c in columns))
    rows = [_echoed(_row(name, [[d["metrics"].get(name) for d in c] for c in columns], series),
                    echo_of(name, documents, axes)) for name in _names(documents)]
    rows.append(_row(WALL_TIME, [[_wall_metric(d) for d in c] for c in columns], series))
    rows += [_row(TELEMETRY_PREFIX + name, [[_telemetry_metric(d, name) for d in c] for c in columns], series)
             for name in _telemetry_names(documents)]
    warnings = tuple(hardware_warnings(columns, refs) + environment_warnings(columns, refs))
    return Comparison(runs, tuple(rows), warnings, tuple(across))


ACROSS_HELP = ("compare across these, comma-separated: inputs or variations (variation.NAME) of the runs, or "
               "'hardware'; by default a run is compared only with runs of its configuration and hardware class")


def across_of(text: str | None) -> tuple[str, ...]:
    """``--across size,variation.algorithm`` as a tuple (empty: compare like with like only)."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def check_across(across: Sequence[str], columns: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    """A name in ``across`` that is neither ``hardware`` nor a configuration key of the runs is
    one usage line listing the names it could be."""
    keys = dict.fromkeys(k for c in columns for d in c for k in config_of(d))
    unknown = [name for name in across if name != HARDWARE and name not in keys]
    if unknown:
        choices = ", ".join([*keys, HARDWARE])
        raise UsageError(f"--across {unknown[0]}: not an input or variation of these runs; pick from {choices}")


def series_key(document: Mapping[str, Any], across: Sequence[str] = ()) -> str:
    """What a run must share with another to be compared with it: its configuration and its
    hardware class, less what ``across`` lets differ."""
    config = {k: v for k, v in config_of(document).items() if k not in across}
    hardware = None if HARDWARE in across else of_document(document).id
    return json.dumps([config, hardware], sort_keys=True, default=str)


def references(columns: Sequence[Sequence[Mapping[str, Any]]], across: Sequence[str] = ()) -> tuple[int | None, ...]:
    """Each column's reference: the index of the first column of its series, None for the
    first column of each series (the baseline is the first of its own)."""
    first: dict[str, int] = {}
    refs: list[int | None] = []
    for index, column in enumerate(columns):
        key = series_key(column[0], across)
        refs.append(first.get(key))
        first.setdefault(key, index)
    return tuple(refs)


@dataclass(frozen=True)
class _Series:
    """How the columns are compared: each one's reference (None: the baseline or a series'
    reference), its conditions against that reference, and why it is a series of its own."""

    refs: tuple[int | None, ...]
    likeness: tuple[Likeness | None, ...]
    notes: tuple[str, ...]


def _series_note(base: Sequence[Mapping[str, Any]], column: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> str:
    """Why a column is not compared with the baseline: ``another configuration (size=20)``,
    ``another hardware class (l4-1x)``."""
    first = column[0]
    why = []
    if config_of(first) != config_of(base[0]):
        why.append(f"another configuration ({config_label(config_of(first), axes) or 'inputs differ'})")
    if of_document(first).id != of_document(base[0]).id:
        why.append(f"another hardware class ({of_document(first).label.split(' | ')[0]})")  # its accelerators
    return " and ".join(why) + ": its own series, not a delta"


def _column(documents: Sequence[Mapping[str, Any]]) -> RunColumn:
    first = documents[0]
    hardware = of_document(first)
    return RunColumn(run_id=first["run_id"], recipe=first["software"]["recipe"]["name"], status=first["status"],
                     created_at=first["created_at"], task=first["benchmark"]["task"], hardware_class=hardware.id,
                     hardware_label=hardware.label, repeats=tuple(d["run_id"] for d in documents),
                     config=config_of(first))


def config_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """A run's configuration: the inputs it was given and the variations selected
    (``variation.NAME``), from ``provenance.query``."""
    query = (document.get("provenance") or {}).get("query") or {}
    config = {str(k): v for k, v in dict(query.get("inputs") or {}).items()}
    config.update({f"variation.{k}": v for k, v in dict(query.get("variations") or {}).items()})
    return config


def config_label(config: Mapping[str, Any], axes: Sequence[str]) -> str:
    """A run's values of ``axes``, as shown under its name or beside its point: ``size=20000,
    builtin=True`` (a variation without its ``variation.`` prefix; ``-`` where it has none)."""
    return ", ".join(f"{axis.removeprefix('variation.')}={config.get(axis, '-')}" for axis in axes)


def axes_of(configs: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The configuration keys whose values differ between ``configs`` (a key one lacks differs)."""
    keys = dict.fromkeys(k for c in configs for k in c)
    return tuple(k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1)


def echo_of(name: str, documents: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> str | None:
    """The axis a metric only echoes: in every run its value is that input's (``items`` of
    demo-sort is its ``size``); None when it is a result."""
    for axis in axes:
        pairs = [(number_of(config_of(d).get(axis)), number_of((d["metrics"].get(name) or {}).get("value")))
                 for d in documents]
        if pairs and all(a is not None and a == v for a, v in pairs):
            return axis
    return None


def number_of(value: Any) -> float | None:
    """A configuration or metric value as a number (None: not one; a boolean is not one)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _echoed(row: MetricRow, axis: str | None) -> MetricRow:
    """A metric that echoes an input is configuration: its cells are ``input``, never better or worse."""
    if axis is None:
        return row
    note = f"the input {axis}: configuration, not a result"
    cells = [row.cells[0]] + [replace(c, verdict="input", noise=note, delta=None, delta_pct=None)
                              for c in row.cells[1:]]
    return replace(row, higher_is_better=None, cells=tuple(cells))


def hardware_warnings(columns: Sequence[Sequence[Mapping[str, Any]]],
                      refs: Sequence[int | None] | None = None) -> list[str]:
    """One warning per hardware class that differs from the baseline's in a column compared
    with the baseline (``refs``: each column's reference, see :func:`references`; None: all
    are), and one per column whose repeats come from more than one class."""
    baseline = of_document(columns[0][0])
    warnings: list[str] = []
    seen = {baseline.id}
    for index, column in enumerate(columns):
        classes = {of_document(d).id: of_document(d) for d in column}
        if len(classes) > 1:
            warnings.append(f"the repeats of run {column[0]['run_id']} come from {len(classes)} hardware classes "
                            f"({', '.join(sorted(classes))}): their spread mixes hardware and noise")
        if refs is not None and refs[index] != 0:
            continue
        for cls in classes.values():
            if cls.id not in seen:
                seen.add(cls.id)
                warnings.append(f"run {column[0]['run_id']} comes from hardware class {cls.id} ({cls.label}), "
                                f"the baseline from {baseline.id} ({baseline.label}): its deltas compare hardware "
                                f"too ({'; '.join(baseline.differences(cls))})")
    return warnings


ENVIRONMENT_PACKAGES = 8
"""At most this many differing packages are named in one environment warning."""


def environment_warnings(columns: Sequence[Sequence[Mapping[str, Any]]],
                         refs: Sequence[int | None] | None = None) -> list[str]:
    """One warning per run compared with the baseline (``refs``, as for
    :func:`hardware_warnings`) that ran in a container while the baseline ran on the host (or
    the other way round) with another interpreter or other library versions: the image's
    Python and libraries are not the host's, so its deltas measure them too."""
    base = columns[0][0]
    warnings: list[str] = []
    for index, column in enumerate(columns[1:], start=1):
        if refs is not None and refs[index] != 0:
            continue
        doc = column[0]
        inside, base_inside = _container_image(doc), _container_image(base)
        if (inside is None) == (base_inside is None):
            continue
        differences = _software_differences(base, doc)
        if differences:
            where = f"in container {inside}" if inside else "on the host"
            base_where = f"in container {base_inside}" if base_inside else "on the host"
            warnings.append(f"run {doc['run_id']} ran {where}, the baseline {base_where}, with different software "
                            f"({'; '.join(differences)}): its deltas measure the environment too")
    return warnings


def _container_image(document: Mapping[str, Any]) -> str | None:
    container = (document.get("system") or {}).get("container")
    return str(container.get("image")) if isinstance(container, Mapping) and container.get("image") else None


def _software_differences(base: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """``python 3.11.7 vs 3.11.2``, ``torch 2.1.0 vs 2.2.0``...: what differs between two runs'
    interpreters and the packages both recorded (a package only one recorded is not compared)."""
    one, two = base.get("software") or {}, other.get("software") or {}
    found = []
    if one.get("python") != two.get("python"):
        found.append(f"python {one.get('python') or 'unknown'} vs {two.get('python') or 'unknown'}")
    packages_one, packages_two = one.get("packages") or {}, two.get("packages") or {}
    common = sorted(set(packages_one) & set(packages_two))
    changed = [name for name in common if packages_one[name] != packages_two[name]]
    found += [f"{name} {packages_one[name]} vs {packages_two[name]}" for name in changed[:ENVIRONMENT_PACKAGES]]
    if len(changed) > ENVIRONMENT_PACKAGES:
        found.append(f"and {len(changed) - ENVIRONMENT_PACKAGES} more package(s)")
    return found


def _hardware_groups(runs: Sequence[RunColumn]) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for run in runs:
        group = groups.setdefault(run.hardware_class, {"label": run.hardware_label, "runs": []})
        group["runs"].append(run.run_id)
    return groups


WALL_TIME = "timing.wall_s"
"""The last row of every comparison: the runs' wall time (measured by cmx, lower is better)."""


TELEMETRY_PREFIX = "telemetry."
"""Rows of the runs' resource summaries (the ``telemetry`` section, docs/telemetry.md) are
named ``telemetry.<metric>`` and follow the run's own metrics and its wall time."""


def _telemetry_metric(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    metrics = (document.get("telemetry") or {}).get("metrics") or {}
    metric: Mapping[str, Any] | None = metrics.get(name)
    return metric


def _telemetry_names(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for d in documents:
        for name in (d.get("telemetry") or {}).get("metrics") or ():
            names.setdefault(name)
    return list(names)


def _wall_metric(document: Mapping[str, Any]) -> dict[str, Any]:
    return {"value": document["timing"]["wall_s"], "unit": "s", "higher_is_better": False}


def _names(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every metric name, primary metrics first, then in order of first appearance."""
    names: dict[str, None] = {}
    for d in documents:
        primary = d["benchmark"].get("primary_metric")
        if primary:
            names.setdefault(primary)
    for d in documents:
        for name in d["metrics"]:
            names.setdefault(name)
    return list(names)


_Column = Sequence[Mapping[str, Any] | None]


def _row(name: str, columns: Sequence[_Column], series: _Series) -> MetricRow:
    """One metric over the columns (each a list of the metric in each repeat, None if absent),
    each column compared with its reference (``series``)."""
    base = _representative(columns[0])
    direction = base["higher_is_better"] if base else next(
        (m["higher_is_better"] for c in columns for m in c if m), None)
    cells = [_baseline_cell(columns[0])]
    for index in range(1, len(columns)):
        ref, likeness = series.refs[index], series.likeness[index]
        if ref is None or likeness is None:
            cells.append(_series_cell(columns[index], series.notes[index]))
        else:
            cells.append(_like_with_like(_cell(columns[ref], columns[index]), likeness))
    return MetricRow(name, direction, tuple(cells))


def _series_cell(column: _Column, note: str) -> Cell:
    """The first column of another series: its value and band, compared with nothing."""
    cell = _baseline_cell(column)
    return cell if cell.verdict == "missing" else replace(cell, verdict="other series", noise=note)


def _like_with_like(cell: Cell, likeness: Likeness) -> Cell:
    """A better/worse cell is ``inconclusive`` where the conditions do not let it be real
    (a metric the machine's speed moves)."""
    if cell.verdict not in ("better", "worse") or not likeness.blocks or not speed_bound(cell.unit):
        return cell
    return replace(cell, verdict="inconclusive", noise=f"{likeness.reason}; {cell.noise}")


def _representative(column: _Column) -> Mapping[str, Any] | None:
    """The column's first present metric (its unit and direction stand for the column)."""
    return next((m for m in column if m), None)


def samples_of(column: _Column) -> Samples | None:
    """The measured values of a column; None when no repeat has a value."""
    values = tuple(float(m["value"]) for m in column if m and m["value"] is not None)
    return Samples(values) if values else None


def _value(column: _Column, samples: Samples) -> float | int:
    """A one-run column's value is the run's own (the best of its repetitions, say), however
    many repetitions give its band; several runs' is their median."""
    first = _representative(column)
    single = len(column) == 1 or samples.n == 1
    return first["value"] if single and first and first["value"] is not None else samples.median


def repetitions_of(column: _Column) -> Samples | None:
    """A one-run column's timed repetitions (its metric's ``samples``), or None: a column of
    several runs, or a run that timed once."""
    present = [m for m in column if m]
    if len(column) != 1 or len(present) != 1 or len(present[0].get("samples") or ()) < 2:
        return None
    return Samples(tuple(float(v) for v in present[0]["samples"]))


def band_of(column: _Column) -> Samples | None:
    """The samples that give a column its noise band: its runs' values, or a single run's
    repetitions."""
    return repetitions_of(column) or samples_of(column)


def _baseline_cell(column: _Column) -> Cell:
    base, samples = _representative(column), band_of(column)
    if base is None:
        return Cell(None, None, "missing", samples=0)
    if samples is None:
        return Cell(None, base["unit"], "baseline", samples=0)
    return Cell(_value(column, samples), base["unit"], "baseline", samples=samples.n,
                low=samples.low, high=samples.high, noise=None if samples.n > 1 else NOISE_UNKNOWN)


def _cell(base_column: _Column, column: _Column) -> Cell:
    base, other = _representative(base_column), _representative(column)
    if other is None:
        return Cell(None, None, "missing", samples=0)
    base_samples, samples = band_of(base_column), band_of(column)
    unit = other["unit"]
    if base is None or base_samples is None or samples is None:
        return Cell(None if samples is None else _value(column, samples), unit, "missing",
                    samples=0 if samples is None else samples.n)
    value = _value(column, samples)
    if base["unit"] != unit:
        return Cell(value, unit, "units differ", samples=samples.n)
    if base["higher_is_better"] != other["higher_is_better"]:
        return Cell(value, unit, "direction differs", samples=samples.n)
    base_value = _value(base_column, base_samples)
    delta = value - base_value
    pct = delta / abs(base_value) * 100.0 if base_value != 0 else None
    verdict, noise = noise_verdict(base_samples, samples, other["higher_is_better"])
    return Cell(value, unit, verdict, delta, pct, samples.n, samples.low, samples.high, noise)


def noise_verdict(base: Samples, other: Samples, higher_is_better: bool) -> tuple[Verdict, str]:
    """The verdict on two distributions of one metric, and how the noise was judged.

    Medians equal: ``same``. One sample each: the naive better/worse, noise unknown. Otherwise
    the difference is real only when the ranges do not overlap (a single value counts as a
    range of one point): else ``within noise``."""
    b, o = base.median, other.median
    if math.isclose(b, o, rel_tol=1e-9, abs_tol=0.0):
        return "same", NOISE_UNKNOWN if base.n == other.n == 1 else f"medians equal ({base.n} vs {other.n} samples)"
    naive: Verdict = "better" if (o > b) == higher_is_better else "worse"
    if base.n == other.n == 1:
        return naive, NOISE_UNKNOWN
    ranges = f"{_fmt(base.low)}..{_fmt(base.high)} ({base.n}) vs {_fmt(other.low)}..{_fmt(other.high)} ({other.n})"
    if other.low <= base.high and base.low <= other.high:
        return "within noise", f"ranges overlap: {ranges}"
    return naive, f"beyond the noise: {ranges}"


def _fmt(value: float) -> str:
    return fmt_number(value)
