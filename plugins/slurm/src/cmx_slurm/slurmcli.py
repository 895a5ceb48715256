"""The Slurm client commands (sbatch, squeue, scontrol, scancel, sacct), each run as an
argument list with a timeout, and what their answers mean for cmx."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.api import JobStatus
from cmx_core.errors import CmxError, UsageError

TIMEOUT_S = 60.0
"""How long one client command may take (a busy controller answers slowly, never this slowly)."""

RUNNING = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                     "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
"""States of a job that has not ended."""

ENDED: Mapping[str, str] = {
    "COMPLETED": "completed", "FAILED": "failed", "SPECIAL_EXIT": "failed", "TIMEOUT": "timeout",
    "DEADLINE": "timeout", "OUT_OF_MEMORY": "oom", "CANCELLED": "cancelled", "PREEMPTED": "preempted",
    "NODE_FAIL": "lost", "BOOT_FAIL": "lost", "REVOKED": "lost",
}
"""Slurm's end states as the base's :class:`JobStatus` states."""


def tool(name: str) -> str:
    """The path of a Slurm client command, or a usage error saying how to get one."""
    found = shutil.which(name)
    if not found:
        raise UsageError(f"slurm executor: '{name}' is not on PATH; run cmx where the Slurm client commands "
                         "are installed (apt-get install slurm-client) or choose another --executor")
    return found


def call(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a client command; a command that hangs is an error naming it."""
    try:
        return subprocess.run([tool(args[0]), *args[1:]], capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        raise CmxError(f"{args[0]} did not answer within {TIMEOUT_S:g} s (is slurmctld up?)") from None


def sbatch(options: Sequence[str], script: Path) -> str:
    """Submit ``script``; the job id (``123``, or ``123`` for a whole array)."""
    proc = call(["sbatch", "--parsable", *options, str(script)], env={**os.environ})
    if proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise CmxError(f"sbatch refused the job: {why[-1] if why else f'exit code {proc.returncode}'}")
    job_id = proc.stdout.strip().split(";", 1)[0]
    if not re.fullmatch(r"\d+", job_id):
        raise CmxError(f"sbatch printed no job id: {proc.stdout.strip()!r}")
    return job_id


def queued(job_ids: Sequence[str]) -> dict[str, str] | None:
    """The state of each listed job still in the queue (one squeue call for all), or None
    when squeue could not answer. Array tasks are listed as ``<array>_<index>``."""
    proc = call(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i %T"])
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return {}  # none of them is known any more
        return None
    states = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


@dataclass(frozen=True)
class JobRecord:
    """What ``scontrol show job -o`` says about one job."""

    state: str
    exit_code: int | None
    signal: int | None
    reason: str
    fields: Mapping[str, str]


def show(job_id: str) -> JobRecord | None:
    """The controller's record of the job, or None when it no longer knows it."""
    proc = call(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return parse_show(proc.stdout.strip().splitlines()[0])


def parse_show(line: str) -> JobRecord:
    """One line of ``scontrol show job -o``: ``Key=Value`` pairs separated by spaces."""
    fields = {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(\S*)", line)}
    code, signal = _exit(fields.get("ExitCode", ""))
    return JobRecord(fields.get("JobState", "UNKNOWN"), code, signal, fields.get("Reason", ""), fields)


def accounted(job_id: str) -> JobRecord | None:
    """The accounting record (sacct), when accounting answers; None otherwise."""
    proc = call(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode"])
    if proc.returncode != 0 or "disabled" in proc.stdout + proc.stderr or not proc.stdout.strip():
        return None
    state, _, exit_text = proc.stdout.strip().splitlines()[0].partition("|")
    code, signal = _exit(exit_text)
    return JobRecord(state.split()[0] if state else "UNKNOWN", code, signal, "", {"State": state})


def _exit(text: str) -> tuple[int | None, int | None]:
    match = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def status_of(record: JobRecord | None) -> JobStatus | None:
    """The end of a job as a :class:`JobStatus`; None while it has not ended."""
    if record is None:
        return JobStatus("lost", None, "Slurm no longer knows the job (not in squeue, scontrol or sacct)")
    state = record.state.split("+", 1)[0]
    if state in RUNNING:
        return None
    mapped = ENDED.get(state, "lost")
    words = f"Slurm state {record.state}" + (f" ({record.reason})" if record.reason not in ("", "None") else "")
    if record.signal:
        words += f", signal {record.signal}"
    return JobStatus(mapped, record.exit_code, words)  # type: ignore[arg-type]


def scancel(job_id: str) -> None:
    """Cancel the job (all tasks of an array when given the array's id)."""
    call(["scancel", job_id])
