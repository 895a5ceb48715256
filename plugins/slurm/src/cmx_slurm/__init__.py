"""cmx-slurm: run a cmx plan as a Slurm batch job.

The executor (``cmx run --executor slurm``) ships the run's lock, submits one ``sbatch`` job
whose script runs ``cmx run --lock`` on the allocated node (``srun`` with N tasks and the
torchrun rendezvous variables when more than one task is asked for), polls the job through
``squeue``/``scontrol`` and folds the far result back. :func:`cmx_slurm.array.submit_array`
submits many runs as one job array (a sweep).
"""

__version__ = "0.1.0"
