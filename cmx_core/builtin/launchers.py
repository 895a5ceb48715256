"""cmx-core's launchers: how the ranks of one run start on a node, whichever executor placed
the node (ReFrame's launcher beside its scheduler). They live in core, like ReFrame's
``mpirun``/``srun``/``local`` in ``reframe/core/launchers``, because no suite owns them:
any step that starts ranks (cmx-train's ``train.run`` today) names one.

* ``torchrun``: ``python -m torch.distributed.run --nproc-per-node N``; one node uses
  ``--standalone``, several use ``--nnodes`` with the c10d rendezvous on ``master_addr`` at
  ``master_port + 1`` (``master_port`` itself is left to the process group the ranks open),
  one torchrun per node;
* ``mpirun``: Open MPI's ``mpirun -np N`` on one node; the ranks read ``OMPI_COMM_WORLD_*``;
* ``env``: the executor already started one task per rank (Slurm's srun sets ``RANK``,
  ``WORLD_SIZE``): the command runs as it is, with ``MASTER_ADDR``/``MASTER_PORT`` set;
* ``none``: one process, no process group (``RANK=0``, ``WORLD_SIZE=1``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from cmx_core.errors import UsageError
from cmx_core.providers.types import Launcher, NodeCommand, RankLayout

MPI_FORWARD = ("MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "PATH", "PYTHONPATH", "OMPI_MCA_btl")
"""Variables ``mpirun -x`` forwards to the ranks (besides every ``CMX_*`` one)."""


def torchrun(command: Sequence[str], layout: RankLayout) -> NodeCommand:
    """``command[0] -m torch.distributed.run OPTIONS command[1:]`` (command[0] is the Python)."""
    python, rest = _python_command(command, "torchrun")
    run = [python, "-m", "torch.distributed.run", f"--nproc-per-node={layout.procs_per_node}",
           f"--max-restarts={layout.max_restarts}",
           "--monitor-interval=0.5"]
    if layout.nodes == 1:
        return NodeCommand((*run, "--standalone", *rest), {}, "c10d standalone (127.0.0.1)")
    endpoint = f"{layout.master_addr}:{layout.master_port + 1}"
    run += [f"--nnodes={layout.nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-id={layout.job_id}", f"--rdzv-conf=join_timeout={int(layout.rdzv_timeout_s)}"]
    return NodeCommand((*run, *rest), {}, f"c10d {endpoint}")


def mpirun(command: Sequence[str], layout: RankLayout) -> NodeCommand:
    if layout.nodes > 1:
        raise UsageError("launcher mpirun here runs on one node; use nodes 1 (or launcher env under Slurm)")
    found = shutil.which("mpirun", path=layout.env.get("PATH"))
    if found is None:
        raise UsageError("launcher mpirun: no mpirun on PATH (Debian: apt-get install openmpi-bin)")
    env = {"MASTER_ADDR": layout.master_addr, "MASTER_PORT": str(layout.master_port), "OMPI_MCA_btl": "self,tcp",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    seen = {**layout.env, **env}
    forward = [key for key in seen if key.startswith("CMX_")] + [key for key in MPI_FORWARD if key in seen]
    argv = [found, "-np", str(layout.procs_per_node), "--oversubscribe", "--bind-to", "none",
            *(x for key in forward for x in ("-x", key)), *command]
    return NodeCommand(tuple(argv), env, f"tcp://{layout.master_addr}:{layout.master_port}")


def env_ranks(command: Sequence[str], layout: RankLayout) -> NodeCommand:
    for key in ("RANK", "WORLD_SIZE"):
        if key not in layout.env:
            raise UsageError(f"launcher env needs {key} set by the executor (Slurm's srun sets it)")
    env = {"MASTER_ADDR": layout.master_addr, "MASTER_PORT": str(layout.master_port)}
    if "LOCAL_RANK" not in layout.env:
        env["LOCAL_RANK"] = layout.env.get("SLURM_LOCALID", "0")
    return NodeCommand(tuple(command), env, f"tcp://{layout.master_addr}:{layout.master_port}")


def no_launcher(command: Sequence[str], layout: RankLayout) -> NodeCommand:
    if layout.world_size > 1:
        raise UsageError(f"launcher none starts one process, but the layout has {layout.world_size} ranks")
    return NodeCommand(tuple(command), {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}, "none")


def _python_command(command: Sequence[str], launcher: str) -> tuple[str, list[str]]:
    if len(command) < 2:
        raise UsageError(f"launcher {launcher}: the command must be a Python and its arguments, got {list(command)}")
    return command[0], list(command[1:])


LAUNCHERS = (
    Launcher(name="torchrun", summary="PyTorch's torchrun: N ranks per node, c10d rendezvous on the first node",
             wrap=torchrun),
    Launcher(name="mpirun", summary="Open MPI's mpirun -np N on one node", wrap=mpirun, multi_node=False),
    Launcher(name="env", summary="The executor started one task per rank (RANK, WORLD_SIZE set): run in place",
             wrap=env_ranks),
    Launcher(name="none", summary="One process, no process group", wrap=no_launcher, multi_node=False),
)
