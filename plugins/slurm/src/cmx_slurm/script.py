"""The batch script sbatch runs and the task script each task runs, written into the run's
stage directory. Every value reaches bash through :func:`shlex.quote`.

The batch script stamps ``started`` (for the overhead benchmark), sets the rendezvous
variables a torchrun-style launcher reads, stamps ``launched`` and starts the task script: directly for one
task, through ``srun`` for more (``--kill-on-bad-exit``: one failing rank stops the rest).
Its last act is ``ended`` (exit code and time), written atomically, so the waiting side sees
the end without asking the scheduler; just before it, ``ended.job`` names the job that ends
(the array's id for an array task), which tells it apart from an ``ended`` a lost attempt
wrote (a task whose slurmd was killed runs on and may write it after its resubmission,
:func:`owned_by`).

Ranks: ``MASTER_ADDR`` is the first host of the allocation, ``MASTER_PORT`` a port derived
from the job id in 20000-29999 (below Linux's ephemeral range), ``WORLD_SIZE`` the number of
tasks, ``RANK`` and ``LOCAL_RANK`` Slurm's ``SLURM_PROCID`` and ``SLURM_LOCALID``. Rank 0
runs the far side proper (``--output`` the run's ``remote`` directory): its result is the
one folded back. Every other rank runs the same locked plan with its own output directory
(``remote-rank-N``) and results store, without the cache (each rank must run its steps,
never take rank 0's entry), so a step that joins a process group finds all its peers.
A job Slurm requeued (``SLURM_RESTART_COUNT``) first sets rank 0's output of the lost run
aside as ``remote-attempt-N``: the far side needs an empty one; it starts from that run's
checkpoints, its steps' attempts counting on (:data:`RESUME_ENV`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

BATCH = "job.sh"
TASK = "task.sh"
STARTED = "started"
LAUNCHED = "launched"
ENDED = "ended"
RESUME_ENV = "CMX_RESUME_FROM"
BASE_ENV = "CMX_ATTEMPT_BASE"
"""What a job-level retry's far run is told (docs/faults.md, "Checkpoints across attempts"):
the earlier attempt's run directory, whose checkpoints it starts from, and how many attempts
came before it (its steps' ``CMX_ATTEMPT`` counts on)."""


def resume_env(output: Path, attempts: int) -> dict[str, str]:
    """The variables of a retry that follows ``attempts`` lost ones, the last one's far run
    directory set aside as ``<output>-attempt-<attempts>``."""
    return {RESUME_ENV: str(output.with_name(f"{output.name}-attempt-{attempts}")), BASE_ENV: str(attempts)}
STARTS = "starts"
"""One line per run of the batch script (``<time> <SLURM_RESTART_COUNT>``): a job Slurm requeued
has more than one, each a scheduler-side recovery recorded as an attempt (cmx_slurm.requeues)."""
ENDED_BY = f"{ENDED}.job"
MARKS = (STARTED, LAUNCHED, ENDED, f"{ENDED}.part", ENDED_BY)
"""What one attempt's batch script stamps into the stage directory (cleared before a resubmission)."""


def owned_by(stage: Path, job_id: str) -> bool:
    """True when the stage's ``ended`` was written by job ``job_id`` (``123``, or an array
    task ``123_4``, whose script names the array); one without ``ended.job`` (written by an
    older cmx) counts as the job's own."""
    if not (stage / ENDED).exists():
        return False
    try:
        return (stage / ENDED_BY).read_text(encoding="utf-8").strip() == job_id.split("_", 1)[0]
    except FileNotFoundError:
        return True


def clear_marks(stage: Path) -> None:
    """Remove the stamps a lost attempt left, so its ``ended`` is never taken for the retry's."""
    for name in MARKS:
        (stage / name).unlink(missing_ok=True)


def task_script(command: Sequence[str], env: Mapping[str, str], stage: Path) -> str:
    """What each task runs: the far cmx command, its environment, its rank's output."""
    argv = list(command)
    out_at = argv.index("--output") + 1
    others = [shlex.quote(a) for a in argv]
    others[out_at] = shlex.quote(argv[out_at] + "-rank-") + '"$RANK"'
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    return (
        "#!/bin/bash\n"
        "# Written by cmx-slurm: one task of the job (see cmx_slurm.script).\n"
        f"{exports}"
        'export RANK="${SLURM_PROCID:-0}" LOCAL_RANK="${SLURM_LOCALID:-0}"\n'
        'if [ "$RANK" = 0 ]; then\n'
        f'  if [ "${{SLURM_RESTART_COUNT:-0}}" != 0 ] && [ -e {shlex.quote(argv[out_at])} ]; then\n'
        f'    mv {shlex.quote(argv[out_at])} {shlex.quote(argv[out_at] + "-attempt-")}"$SLURM_RESTART_COUNT"\n'
        f'    export {RESUME_ENV}={shlex.quote(argv[out_at] + "-attempt-")}"$SLURM_RESTART_COUNT"'
        f' {BASE_ENV}="$SLURM_RESTART_COUNT"\n'
        "  fi\n"
        f"  exec {' '.join(shlex.quote(a) for a in argv)}\n"
        "fi\n"
        f'export CMX_DATA_DIR={shlex.quote(str(stage / "data-rank-"))}"$RANK"\n'
        f"exec {' '.join(others)} --no-cache\n"
    )


def _body(ntasks: int) -> str:
    """The part of a batch script after ``STAGE`` is set."""
    launch = 'srun --kill-on-bad-exit=1 --label bash "$STAGE/task.sh"' if ntasks > 1 else 'bash "$STAGE/task.sh"'
    return (
        f'rm -f "$STAGE/{ENDED}"\n'  # a requeued job's lost run may have left one
        f'echo "$EPOCHREALTIME" > "$STAGE/{STARTED}"\n'
        f'echo "$EPOCHREALTIME ${{SLURM_RESTART_COUNT:-0}}" >> "$STAGE/{STARTS}"\n'
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)\n'
        'export MASTER_ADDR="${MASTER_ADDR:-${SLURMD_NODENAME:-localhost}}"\n'
        "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000))\n"
        'export WORLD_SIZE="${SLURM_NTASKS:-1}"\n'
        f'echo "$EPOCHREALTIME" > "$STAGE/{LAUNCHED}"\n'
        f"{launch}\n"
        "rc=$?\n"
        f'echo "${{SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}}" > "$STAGE/{ENDED_BY}"\n'
        f'echo "$rc $EPOCHREALTIME" > "$STAGE/{ENDED}.part" && mv "$STAGE/{ENDED}.part" "$STAGE/{ENDED}"\n'
        'exit "$rc"\n'
    )


def batch_script(stage: Path, ntasks: int) -> str:
    """The batch script of one run."""
    return ("#!/bin/bash\n# Written by cmx-slurm: one cmx run (see cmx_slurm.script).\nset -u\n"
            f"STAGE={shlex.quote(str(stage))}\n{_body(ntasks)}")


def array_script(stages: Sequence[Path], ntasks: int) -> str:
    """The batch script of a job array: task ``i`` runs the run staged in ``stages[i]``,
    its output in that stage directory."""
    listed = " ".join(shlex.quote(str(s)) for s in stages)
    return ("#!/bin/bash\n# Written by cmx-slurm: one cmx run per array task (see cmx_slurm.script).\nset -u\n"
            f"STAGES=({listed})\n"
            'STAGE="${STAGES[$SLURM_ARRAY_TASK_ID]}"\n'
            'exec >"$STAGE/slurm.out" 2>&1\n'
            f"{_body(ntasks)}")


def write(path: Path, text: str) -> Path:
    """Write an executable script."""
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path
