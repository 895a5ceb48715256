"""What a sweep keeps on disk while it runs, so that ``cmx sweep --resume ID`` can finish it.

``<data>/sweeps/<id>/sweep.json`` (written before any point runs) is the sweep's definition:
tags, fixed inputs, the matrix, the run options and ``-j``. Each point that ends gets its
record, ``<data>/sweeps/<id>/point-<N>.json`` (a :class:`PointOutcome`), written atomically as
soon as the point's result is recorded, not at the end of the sweep: a ``kill -9`` of the
driver loses no point that had ended. Recording is idempotent per sweep and point: under a
lock, a point that already has a successful record keeps it (:func:`record_point` returns
the stored one), so no point is ever recorded twice. A point that ran to a successful
``result.json`` whose record the kill cut off is adopted from that result by
:func:`finished_points`, not run again.

While a sweep (or its resume) runs it holds ``<data>/sweeps/<id>/.lock``; a second resume
of the same sweep is refused with one line instead of running the same points twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from cmx_core import paths
from cmx_core.datautil import atomic_write, loads_bounded
from cmx_core.errors import ResultsError, UsageError
from cmx_core.results.store import ResultStore
from cmx_core.run import inflight
from cmx_core.sweep.batch import PointOutcome, point_warnings
from cmx_core.sweep.dirs import run_dirs

SPEC_FILE = "sweep.json"
LOCK_FILE = ".lock"
ORPHAN_WAIT_S = 60.0
_RECORDING = threading.Lock()  # the per-point threads of one driver record one at a time


@dataclass(frozen=True)
class SweepSpec:
    """Everything needed to run (or resume) the sweep's points."""

    sweep_id: str
    tags: str
    base_inputs: Mapping[str, str]
    matrix: tuple[Mapping[str, str], ...]
    run_options: tuple[str, ...] = ()
    jobs: int = 1
    executor: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "tags": self.tags, "base_inputs": dict(self.base_inputs),
                "matrix": [dict(p) for p in self.matrix], "run_options": list(self.run_options),
                "jobs": self.jobs, "executor": self.executor}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> SweepSpec:
        return cls(str(value["sweep_id"]), str(value["tags"]),
                   {str(k): str(v) for k, v in dict(value["base_inputs"]).items()},
                   tuple({str(k): str(v) for k, v in dict(p).items()} for p in value["matrix"]),
                   tuple(str(o) for o in value["run_options"]), int(value["jobs"]),
                   None if value.get("executor") is None else str(value["executor"]))


def write_spec(folder: Path, spec: SweepSpec) -> Path:
    path = folder / SPEC_FILE
    atomic_write(path, json.dumps(spec.to_json(), indent=2, sort_keys=True))
    return path


def read_spec(data_dir: Path, sweep_id: str) -> SweepSpec:
    """The definition of sweep ``sweep_id``; a one-line ResultsError naming what to do."""
    if not sweep_id.startswith("sw-") or "/" in sweep_id or sweep_id == "sw-":
        raise ResultsError(f"--resume {sweep_id!r}: not a sweep id (they look like sw-20261201-120000-1a2b3c4d)")
    path = data_dir / "sweeps" / sweep_id / SPEC_FILE
    try:
        return SweepSpec.from_json(loads_bounded(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such sweep to resume; `ls {path.parent.parent}` lists the sweeps") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{path}: not a readable sweep definition ({exc}); run the sweep again") from None


@contextmanager
def holding(folder: Path) -> Iterator[None]:
    """The sweep's lock for as long as its points run; a one-line UsageError when another
    cmx holds it."""
    lock = FileLock(str(folder / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(f"sweep {folder.name} is running in another cmx process ({folder / LOCK_FILE} is held); "
                         "wait for it to end, then resume it") from None
    try:
        yield
    finally:
        lock.release()


def record_path(folder: Path, index: int) -> Path:
    return folder / f"point-{index}.json"


def record_point(folder: Path, outcome: PointOutcome) -> PointOutcome:
    """Store ``outcome`` as the point's record, atomically, unless the point already has a
    successful one: that one stays and is returned (a point is never recorded twice)."""
    path = record_path(folder, outcome.index)
    with _RECORDING:
        existing = read_record(path)
        if existing is not None and not existing.failed:
            return existing
        write_record(path, outcome)
    return outcome


def write_record(path: Path, outcome: PointOutcome) -> None:
    """``outcome`` as a record at ``path``, atomically (:func:`read_record` reads it back)."""
    atomic_write(path, json.dumps(asdict(outcome), indent=2, sort_keys=True))


def read_record(path: Path) -> PointOutcome | None:
    try:
        value = loads_bounded(path.read_text(encoding="utf-8"))
        return PointOutcome(int(value["index"]), {str(k): str(v) for k, v in dict(value["point"]).items()},
                            str(value["status"]), int(value["exit_code"]), value.get("run_id"),
                            value.get("result_path"), str(value.get("message") or ""), float(value.get("wall_s", 0)),
                            tuple(str(w) for w in value.get("warnings") or ()))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or cut short: the point has no record


def wait_for_points(folder: Path, timeout_s: float = ORPHAN_WAIT_S) -> None:
    """Wait (bounded) for point processes a killed driver left running: they got SIGTERM
    with it (:func:`cmx_core.run.processes.dies_with_cmx`) and record their own end; a
    point still running after ``timeout_s`` is a one-line UsageError."""
    deadline = time.monotonic() + timeout_s
    while (pids := inflight.running_under(folder)):
        if time.monotonic() > deadline:
            raise UsageError(f"sweep {folder.name}: its points are still running in cmx processes "
                             f"{', '.join(map(str, pids))}; wait for them to end, then resume it")
        time.sleep(0.1)


def finished_points(folder: Path, spec: SweepSpec) -> dict[int, PointOutcome]:
    """Each point that has a successful result: its record, or (adopted, and recorded now) a
    successful ``result.json`` of this sweep in one of its run directories."""
    found = {index: finished_point(folder, spec, index) for index in range(len(spec.matrix))}
    return {index: outcome for index, outcome in found.items() if outcome is not None}


def finished_point(folder: Path, spec: SweepSpec, index: int) -> PointOutcome | None:
    """Point ``index``'s successful outcome (as :func:`finished_points` finds it), or None."""
    record = read_record(record_path(folder, index))
    if record is not None and not record.failed:
        return record
    adopted = _adopt(spec.sweep_id, index, spec.matrix[index], run_dirs(folder, index))
    return record_point(folder, adopted) if adopted is not None else None


def _adopt(sweep_id: str, index: int, point: Mapping[str, str], dirs: Sequence[Path]) -> PointOutcome | None:
    """The point's outcome from a successful result one of its runs wrote (and indexed it:
    a driver killed between the two steps left it unindexed)."""
    for run_dir in dirs:
        document = _document(run_dir / "result.json")
        sweep = (document or {}).get("provenance", {}).get("sweep") or {}
        if document is None or document.get("status") == "error" or sweep.get("id") != sweep_id \
                or sweep.get("index") != index:
            continue
        ResultStore(paths.results_db()).index(document, run_dir / "result.json")
        return PointOutcome(index, dict(point), str(document.get("status")), 0, run_id=str(document["run_id"]),
                            result_path=str(run_dir / "result.json"), wall_s=_wall_s(document),
                            warnings=point_warnings(document))
    return None


def _wall_s(document: Mapping[str, Any]) -> float:
    """The adopted result's own wall time (``timing.wall_s``), not 0."""
    timing = document.get("timing")
    try:
        return float(timing["wall_s"]) if isinstance(timing, Mapping) else 0.0
    except (KeyError, TypeError, ValueError):
        return 0.0


def _document(path: Path) -> dict[str, Any] | None:
    try:
        value = loads_bounded(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and "run_id" in value else None
