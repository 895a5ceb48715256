"""Slurm on the test bed: one slurmd per node, so a 2-node job's ranks run on 2 hosts."""

from __future__ import annotations

import time
from pathlib import Path

from tests.netbed import bed as netbed


def test_srun_two_nodes_reports_two_hostnames(bed: netbed.Bed) -> None:
    job = bed.run(1, ["srun", "-N2", "--ntasks-per-node=1", "-l", "hostname"], timeout=120)
    assert job.returncode == 0, job.stderr
    ranks = dict(line.split(": ", 1) for line in job.stdout.strip().splitlines())
    assert sorted(ranks) == ["0", "1"]
    assert sorted(ranks.values()) == ["cmxn1", "cmxn2"]


def test_sbatch_two_nodes_from_the_second_node(bed: netbed.Bed, tmp_path: Path) -> None:
    """A batch job submitted on node 2: its steps reach node 1's controller over the bridge and
    each task prints its host and the address Slurm gave its node."""
    out = tmp_path / "job.out"
    submit = bed.run(2, ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-o", str(out), "--wrap",
                         'srun -l sh -c \'echo "$(hostname) $SLURM_NODEID"\''], timeout=60)
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    state = ""
    while time.monotonic() < deadline:
        state = bed.run(2, ["scontrol", "show", "job", job, "-o"], timeout=60).stdout
        if "JobState=COMPLETED" in state or "JobState=FAILED" in state:
            break
        time.sleep(0.5)
    assert "JobState=COMPLETED" in state, state
    lines = sorted(line.split(": ", 1)[1] for line in out.read_text().strip().splitlines())
    assert lines == ["cmxn1 0", "cmxn2 1"]
    assert "NodeList=cmxn[1-2]" in state
