"""``cmx sweep``: one normal run per point of a parameter matrix, on any executor.

A matrix is ``--matrix KEY=V1,V2,...`` or a range ``KEY=LO..HI[/STEP|*FACTOR]``
(repeatable): the points are the cartesian product
of the axes in the order given, or, with ``--zip``, the axes taken side by side (they must
be equally long). Every point is one run whose result is indexed in the store like any run
and carries ``provenance.sweep = {id, index, point}``; its run directory is
``<data>/sweeps/<id>/point-<N>/``. How the points run depends on the executor:

* one with a batch entry (``Executor.run_many``: cmx-slurm's job array, cmx-ray's tasks over
  one connection) gets every point at once, planned and recorded in this process
  (:mod:`cmx_core.sweep.batch`), ``-j N`` as the most points running at once: starting a
  ``cmx run`` per point would cost seconds each on top of the scheduler's own latency;
* any other (local, docker, k8s...) runs each point as a separate ``cmx run`` process (so a
  point that crashes, hangs until its executor's limit or leaks state cannot touch the
  others, and ``-j N`` runs N at once), its stderr beside its run directory,
  ``point-<N>.log``. So do ``run_options`` the batch path does not know and a given ``env``
  (the points' process environment). A point the sweep has planned already gets that plan
  on its standard input (:mod:`cmx_core.plan.handoff`), so it is not planned again there.

The manifest, ``<data>/sweeps/<id>.json``, lists each point's inputs, status, run id and
result path; ``cmx results compare --sweep ID`` reads it. A failed point does not stop the
others. The sweep's definition and each point's record, written as the point ends
(:mod:`cmx_core.sweep.state`), are what :func:`resume_sweep` (``cmx sweep --resume ID``)
reads to run only the points without a successful result.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.datautil import atomic_write, loads_bounded
from cmx_core.errors import ResultsError, UsageError
from cmx_core.plan.handoff import FLAG as HANDOFF_FLAG
from cmx_core.plan.handoff import plan_bytes
from cmx_core.run.processes import dies_with_cmx
from cmx_core.run.runids import new_run_id
from cmx_core.sweep.batch import (
    BatchSweep,
    Planned,
    PointOutcome,
    batch_executor,
    parse_point_options,
    point_warnings,
    run_points,
)
from cmx_core.sweep.dirs import fresh_run_dir
from cmx_core.sweep.request import POLL_S, Driver, Live, OnPoint, SweepRequest
from cmx_core.sweep.state import (
    SweepSpec,
    finished_points,
    holding,
    read_spec,
    record_point,
    wait_for_points,
    write_spec,
)
from cmx_core.telemetry.journal import ENV_JOURNAL

__all__ = ["MAX_POINTS", "SWEEPS_DIR", "Axis", "PointOutcome", "SweepResult", "new_sweep_id", "parse_axes",
           "point_command", "points", "read_manifest", "resume_sweep", "run_one_point", "run_sweep", "SweepRequest",
           "write_manifest"]

SWEEPS_DIR = "sweeps"
MAX_POINTS = 10_000
WHOLE = ("valid", "completed", "invalid")
"""A result's status when its run measured to the end."""
STOP_GRACE_S = 60.0
"""How long a pruned point's cmx gets after SIGTERM to record its run before SIGKILL."""


@dataclass(frozen=True)
class Axis:
    """One ``--matrix KEY=V1,V2`` argument."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class SweepResult:
    sweep_id: str
    tags: str
    points: tuple[PointOutcome, ...]
    manifest: Path
    wall_s: float
    executor: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    axes: tuple[str, ...] = ()

    @property
    def failed(self) -> int:
        return sum(p.failed for p in self.points)

    def to_json(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "tags": self.tags, "executor": self.executor, "axes": list(self.axes),
                "inputs": dict(self.inputs), "points": [asdict(p) for p in self.points],
                "failed": self.failed, "wall_s": round(self.wall_s, 3), "manifest": str(self.manifest)}


_RANGE = re.compile(r"^(-?\d+(?:\.\d+)?)\.\.(-?\d+(?:\.\d+)?)(?:([/*])(\d+(?:\.\d+)?))?$")


def expand_range(text: str) -> tuple[str, ...] | None:
    """``LO..HI`` (whole numbers, step 1), ``LO..HI/STEP`` (arithmetic) or ``LO..HI*FACTOR``
    (geometric, e.g. ``1..256*2``) as its values, HI included when the steps reach it; None
    when ``text`` is not a range. A range that is empty or too long is a UsageError."""
    found = _RANGE.match(text.strip())
    if found is None:
        return None
    low, high, kind, step_text = found.groups()
    whole = all("." not in t for t in (low, high, step_text or "1"))
    lo, hi, step = float(low), float(high), float(step_text or 1)
    if kind is None and not whole:
        raise UsageError(f"--matrix range {text!r}: a range of decimals needs a step, e.g. 0.1..0.9/0.1")
    if hi < lo or step <= 0 or (kind == "*" and (step <= 1 or lo <= 0)):
        raise UsageError(f"--matrix range {text!r}: expected LO..HI with LO <= HI, /STEP > 0 or *FACTOR > 1 "
                         "(and LO > 0 for a factor)")
    values: list[float] = []
    value = lo
    while value <= hi * (1 + 1e-12) and len(values) <= MAX_POINTS:
        values.append(value)
        value = value * step if kind == "*" else lo + len(values) * step
    if len(values) > MAX_POINTS:
        raise UsageError(f"--matrix range {text!r}: more than {MAX_POINTS} values")
    return tuple(str(int(v)) if whole else f"{v:.10g}" for v in values)


def parse_axes(pairs: Sequence[str]) -> tuple[Axis, ...]:
    """``KEY=V1,V2`` (or ``KEY=LO..HI``, :func:`expand_range`) arguments as axes; a bad one
    is a one-line UsageError."""
    axes: list[Axis] = []
    for pair in pairs:
        key, sep, values = pair.partition("=")
        key = key.strip().replace("-", "_")
        parts = expand_range(values) or tuple(v.strip() for v in values.split(","))
        if not sep or not key or not values.strip() or any(not v for v in parts):
            raise UsageError(f"--matrix {pair!r}: expected KEY=V1,V2,... with non-empty values, "
                             "e.g. --matrix scenario=Offline,Server")
        if any(a.key == key for a in axes):
            raise UsageError(f"--matrix {key}: given twice; list all its values in one --matrix")
        axes.append(Axis(key, parts))
    if not axes:
        raise UsageError("cmx sweep: give at least one --matrix KEY=V1,V2,...")
    return tuple(axes)


def points(axes: Sequence[Axis], zipped: bool = False) -> list[dict[str, str]]:
    """The points of the matrix: the cartesian product, or the zipped axes."""
    if zipped:
        lengths = {a.key: len(a.values) for a in axes}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise UsageError(f"cmx sweep --zip: every --matrix needs the same number of values ({shown})")
        rows = list(zip(*(a.values for a in axes), strict=True))
    else:
        total = 1
        for axis in axes:
            total *= len(axis.values)
        if total > MAX_POINTS:
            raise UsageError(f"cmx sweep: the matrix has {total} points, more than {MAX_POINTS}; split it")
        rows = list(itertools.product(*(a.values for a in axes)))
    return [{a.key: value for a, value in zip(axes, row, strict=True)} for row in rows]


def new_sweep_id() -> str:
    return "sw-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + new_run_id()[:8]


def point_command(tags: str, inputs: Mapping[str, str], sweep: Mapping[str, Any],
                  run_options: Sequence[str]) -> list[str]:
    """The ``cmx run`` argument list of one point (no shell: values travel as arguments)."""
    return [sys.executable, "-m", "cmx_core", "run", "recipe", f"--tags={tags}",
            f"--sweep-point={json.dumps(sweep, sort_keys=True)}", *run_options,
            *(f"--{key}={value}" for key, value in inputs.items())]


def run_sweep(request: SweepRequest, *, on_point: OnPoint | None = None, env: Mapping[str, str] | None = None,
              planned: Planned | None = None) -> SweepResult:
    """Run every point of ``request`` and write the manifest; never raises for a failed
    point. ``on_point`` is told of each point as it ends; ``env`` is the points' process
    environment (None: this one's); ``planned``: the plans the caller's check made
    (:func:`~cmx_core.sweep.batch.plan_points`), used instead of planning each point again."""
    spec = SweepSpec(new_sweep_id(), request.tags, dict(request.base_inputs), tuple(request.matrix),
                     tuple(request.run_options), request.jobs, request.executor)
    folder = request.data_dir / SWEEPS_DIR / spec.sweep_id
    folder.mkdir(parents=True, exist_ok=True)
    write_spec(folder, spec)  # before any point runs: what --resume reads
    point_options = request.point_options or {}
    return _run(spec, request.data_dir, Driver(on_point, env, request.batch and not point_options, planned,
                                               point_options))


def resume_sweep(sweep_id: str, *, data_dir: Path, on_point: OnPoint | None = None,
                 env: Mapping[str, str] | None = None, batch: bool = True,
                 plan: Callable[[SweepSpec, Sequence[int]], Planned] | None = None) -> SweepResult:
    """Run the points of sweep ``sweep_id`` that have no successful result (as the sweep was
    defined: its tags, inputs, matrix, options and ``-j``) and write its manifest with every
    point. ``plan`` checks the points to run first (the CLI's check; None: no check)."""
    spec = read_spec(data_dir, sweep_id)
    folder = data_dir / SWEEPS_DIR / sweep_id
    with holding(folder):
        wait_for_points(folder)
        todo = [i for i in range(len(spec.matrix)) if i not in finished_points(folder, spec)]
    planned = plan(spec, todo) if plan is not None and todo else None
    return _run(spec, data_dir, Driver(on_point, env, batch, planned))


def _run(spec: SweepSpec, data_dir: Path, driver: Driver) -> SweepResult:
    """Under the sweep's lock, run each point without a successful result; each one's record
    is written as soon as it ends; then the manifest of every point."""
    folder = data_dir / SWEEPS_DIR / spec.sweep_id
    began = time.monotonic()
    with holding(folder):
        done = finished_points(folder, spec)
        todo = tuple(i for i in range(len(spec.matrix)) if i not in done)
        together = _batch(spec, folder, todo, driver.env, driver.planned) if driver.batch and todo else None
        ran = run_points(together, driver.on_point) if together is not None else \
            _run_apart(spec, folder, todo, driver)
    outcomes = {**done, **{o.index: o for o in ran}}
    return write_manifest(SweepResult(spec.sweep_id, spec.tags, tuple(outcomes[i] for i in sorted(outcomes)),
                               data_dir / SWEEPS_DIR / f"{spec.sweep_id}.json", time.monotonic() - began,
                               spec.executor, dict(spec.base_inputs), tuple(spec.matrix[0]) if spec.matrix else ()))


def _run_apart(spec: SweepSpec, folder: Path, todo: Sequence[int], driver: Driver) -> tuple[PointOutcome, ...]:
    """One ``cmx run`` process per point, ``jobs`` at once; a point planned already is
    handed its plan."""
    with ThreadPoolExecutor(max_workers=spec.jobs) as pool:
        return tuple(pool.map(lambda index: run_one_point(spec, folder, index, driver), todo))


def run_one_point(spec: SweepSpec, folder: Path, index: int, driver: Driver, live: Live | None = None
                  ) -> PointOutcome:
    """Point ``index`` of the matrix as its own ``cmx run`` process, recorded as it ends and
    told to ``driver.on_point`` (also what ``cmx sweep --search`` runs, one point a trial;
    ``live``: its watch, which may stop it, status ``pruned``)."""
    outcome = record_point(folder, run_point_in(spec, index, fresh_run_dir(folder, index), driver, live))
    if driver.on_point is not None:
        driver.on_point(outcome, len(spec.matrix))
    return outcome


def run_point_in(spec: SweepSpec, index: int, run_dir: Path, driver: Driver, live: Live | None = None
                 ) -> PointOutcome:
    """Point ``index`` run once into ``run_dir``, not recorded as the point's (a search's
    confirmation runs of a point are their own records)."""
    point = spec.matrix[index]
    sweep = {"id": spec.sweep_id, "index": index, "point": dict(point)}
    the_plan = driver.planned.plans.get(index) if driver.planned is not None else None
    extra = [*driver.point_options.get(index, ()), *([HANDOFF_FLAG] if the_plan is not None else [])]
    command = point_command(spec.tags, {**spec.base_inputs, **point}, sweep,
                            [*spec.run_options, *extra, "--output", str(run_dir)])
    handed = plan_bytes(the_plan) if the_plan is not None else None
    return _run_point(index, point, command, run_dir, Launch(driver.env, handed, live))


def write_manifest(result: SweepResult) -> SweepResult:
    """Write the manifest."""
    atomic_write(result.manifest, json.dumps(result.to_json(), indent=2, sort_keys=True))
    return result


def _batch(spec: SweepSpec, folder: Path, todo: Sequence[int], env: Mapping[str, str] | None,
           planned: Planned | None) -> BatchSweep | None:
    """The batch of this sweep when its executor has a batch entry and the batch path knows
    every run option (None: one ``cmx run`` process per point)."""
    options = parse_point_options(spec.run_options)
    if env is not None or options is None or not spec.matrix:
        return None
    chosen = batch_executor(options.executor_name(spec.executor))
    if chosen is None or (options.retries is not None and not chosen.batch_retries):
        return None
    return BatchSweep(spec.sweep_id, folder, spec.tags, spec.base_inputs, spec.matrix, chosen, options, spec.jobs,
                      tuple(todo), planned, lambda outcome: record_point(folder, outcome))


@dataclass(frozen=True)
class Launch:
    """How a point's process starts: its environment (None: this one's), the plan handed to
    its standard input, and the watch that may stop it."""

    env: Mapping[str, str] | None = None
    handed: bytes | None = None
    live: Live | None = None

    def environment(self) -> dict[str, str]:
        env = dict(self.env) if self.env is not None else os.environ.copy()
        return {**env, ENV_JOURNAL: str(self.live.journal)} if self.live is not None else env


def _run_point(index: int, point: Mapping[str, str], command: list[str], run_dir: Path, launch: Launch
               ) -> PointOutcome:
    """Run one point's ``cmx run`` (``launch.handed``: its plan, written to its standard
    input) and read the result it wrote into ``run_dir`` (an error result too: a failed step
    still records one); ``failed`` when it wrote none, ``pruned`` when its watch stopped it."""
    started = time.monotonic()
    log = run_dir.with_suffix(".log")
    with open(log, "wb") as stderr:  # SIGTERM when this driver dies: the point's cmx records it as interrupted
        if launch.live is None:
            proc = subprocess.run([*dies_with_cmx("TERM"), *command], input=launch.handed,
                                  stdin=subprocess.DEVNULL if launch.handed is None else None,
                                  stdout=subprocess.DEVNULL, stderr=stderr, env=launch.environment(), check=False)
            returncode, pruned = proc.returncode, ""
        else:
            returncode, pruned = _watched([*dies_with_cmx("TERM"), *command], stderr, launch)
    wall = time.monotonic() - started
    document = _document(run_dir / "result.json")
    if pruned and document is not None and document.get("status") in WHOLE:
        pruned, returncode = "", 0  # it finished before the SIGTERM took effect: its result is whole
    message = pruned or ("" if returncode == 0 else _last_line(log))
    if document is None:
        return PointOutcome(index, point, "pruned" if pruned else "failed", returncode or 1, message=message,
                            wall_s=wall)
    return PointOutcome(index, point, "pruned" if pruned else str(document.get("status")), returncode,
                        run_id=str(document.get("run_id")), result_path=str(run_dir / "result.json"),
                        message=message, wall_s=wall, warnings=point_warnings(document))


def _watched(command: list[str], stderr: Any, launch: Launch) -> tuple[int, str]:
    """Run ``command`` while its watch reads its live series; SIGTERM (the point's cmx then
    records its run as interrupted) once the watch gives a reason. The exit code and the reason."""
    assert launch.live is not None and launch.handed is None, "a watched point plans itself"
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            env=launch.environment())
    reason, stopped = "", 0.0
    while True:
        try:
            return proc.wait(timeout=POLL_S), reason
        except subprocess.TimeoutExpired:
            pass
        if not reason and (reason := launch.live.poll()):
            proc.terminate()
            stopped = time.monotonic()
        elif reason and time.monotonic() - stopped > STOP_GRACE_S:
            proc.kill()  # it did not end on SIGTERM: its inflight marker records it as interrupted


def _document(path: Path) -> dict[str, Any] | None:
    try:
        value = loads_bounded(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and "run_id" in value else None


def _last_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def read_manifest(data_dir: Path, sweep_id: str) -> dict[str, Any]:
    """A sweep's manifest, or a one-line ResultsError naming what to do."""
    if not sweep_id.startswith("sw-") or "/" in sweep_id or sweep_id in ("sw-",):
        raise ResultsError(f"--sweep {sweep_id!r}: not a sweep id (they look like sw-20261201-120000-1a2b3c4d)")
    path = data_dir / SWEEPS_DIR / f"{sweep_id}.json"
    try:
        value = loads_bounded(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such sweep; `ls {path.parent}` lists the sweeps") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: not a readable sweep manifest ({exc}); run the sweep again") from None
    if not isinstance(value, dict) or not isinstance(value.get("points"), list):
        raise ResultsError(f"{path}: not a sweep manifest (no points); run the sweep again")
    return value
