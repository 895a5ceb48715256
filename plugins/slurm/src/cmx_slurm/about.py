"""What cmx-slurm says of itself (a module of its own: the light entry point and the
executor both name it, and the executor must not import the entry point)."""

SUMMARY = "Submit the plan as a Slurm batch job (sbatch; srun with N tasks; the run dir must be shared)"
