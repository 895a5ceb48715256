"""Runs that a killed cmx left behind are recorded, not lost.

When a run starts, the engine writes ``<data>/inflight/<run_id>.json``: the PID (with its
start time, so a reused PID is not mistaken for it), the run directory and the error result
the run would get if it never finished. A run that ends in any way cmx sees (success,
failure, Ctrl-C) removes its marker. At the start of every later run (and of ``cmx results
list``), :func:`reap` writes the stored error result, status ``error`` with the reason
"interrupted", for each marker whose process is gone and whose run wrote no result, and
indexes it: ``cmx results list --status error`` shows those runs. The marker also holds the
token the run's step processes carry (:mod:`cmx_core.run.watchdog`): a process that still
carries it is killed then, should the run's watchdog have died with cmx.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core import paths
from cmx_core.datautil import atomic_write, loads_bounded
from cmx_core.errors import ResultsError
from cmx_core.results.store import ResultStore
from cmx_core.results.writer import write_result
from cmx_core.run.processes import TOKEN
from cmx_core.run.watchdog import kill_marked
from cmx_core.sandbox.step_group import sweep_left_groups

INFLIGHT_DIR = "inflight"
INTERRUPTED = "interrupted: the cmx process (pid {pid}) ended before the run finished (killed, or the machine stopped)"


def _dir() -> Path:
    return paths.data_dir() / INFLIGHT_DIR


def process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def mark(run_id: str, run_dir: Path, document: Mapping[str, Any]) -> Path:
    """Record that ``run_id`` is running in this process; ``document`` is its result if it never finishes."""
    folder = _dir()
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"{run_id}.json"
    pid = os.getpid()

    atomic_write(marker, json.dumps({"pid": pid, "pid_start": process_start(pid), "run_dir": str(run_dir),
                                     "token": TOKEN, "document": document}, default=str))
    return marker


def clear(run_id: str) -> None:
    try:
        (_dir() / f"{run_id}.json").unlink()
    except FileNotFoundError:
        pass


def running_under(folder: Path) -> list[int]:
    """The PIDs of live cmx processes whose in-flight run is in ``folder`` (or below it)."""
    directory = _dir()
    pids = []
    for marker in directory.glob("*.json") if directory.is_dir() else ():
        try:
            state = loads_bounded(marker.read_text(encoding="utf-8"))
            pid, start, run_dir = int(state["pid"]), state["pid_start"], Path(state["run_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if folder.resolve() in run_dir.resolve().parents and _alive(pid, start):
            pids.append(pid)
    return pids


def orphans_under(folder: Path) -> dict[Path, str]:
    """The runs in ``folder`` (or below it) whose cmx process is gone and which wrote no
    result: run directory (resolved) to run id. A batch executor that adopts (cmx-slurm: a
    killed sweep's array tasks run on) takes them over instead of running them again."""
    directory = _dir()
    found: dict[Path, str] = {}
    for marker in directory.glob("*.json") if directory.is_dir() else ():
        try:
            state = loads_bounded(marker.read_text(encoding="utf-8"))
            pid, start, run_dir = int(state["pid"]), state["pid_start"], Path(state["run_dir"]).resolve()
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if folder.resolve() in run_dir.parents and not _alive(pid, start) and not (run_dir / "result.json").exists():
            found[run_dir] = marker.stem
    return found


def _alive(pid: int, start: str | None) -> bool:
    return process_start(pid) is not None and process_start(pid) == start


def reap() -> list[str]:
    """Record the runs of dead cmx processes as interrupted, and kill what their steps left
    in their cgroups (once per process); the run ids recorded."""
    sweep_left_groups()
    folder = _dir()
    if not folder.is_dir():
        return []
    recorded = []
    for marker in folder.glob("*.json"):
        try:
            state = loads_bounded(marker.read_text(encoding="utf-8"))
            pid, start, run_dir, document = state["pid"], state["pid_start"], Path(state["run_dir"]), state["document"]
        except (OSError, ValueError, KeyError, TypeError):
            marker.unlink(missing_ok=True)  # a marker cut short by the kill itself: nothing to record
            continue
        if _alive(int(pid), start):
            continue
        if isinstance(state.get("token"), str):  # what its steps started and its watchdog did not kill
            kill_marked(state["token"])
        if run_dir.is_dir():
            done = _record(document, run_dir)
            if done is None:
                continue  # not recorded (the index busy or unwritable): the marker stays, a later start retries
            recorded += done
        marker.unlink(missing_ok=True)
    return recorded


def _record(document: dict[str, Any], run_dir: Path) -> list[str] | None:
    """Write the interrupted run's result and index it; a ``result.json`` already there (the
    run wrote it, or an earlier reap did, before the kill or a failure cut the indexing short)
    is indexed as it is, which is idempotent. None when it could not be recorded."""
    path = run_dir / "result.json"
    try:
        if path.exists():
            ResultStore(paths.results_db()).index(loads_bounded(path.read_text(encoding="utf-8")), path)
            return []
        path = write_result(run_dir, document, suites=None)
        ResultStore(paths.results_db()).index(document, path, validated=True)
    except (ResultsError, OSError, ValueError):
        return None
    return [str(document.get("run_id"))]
