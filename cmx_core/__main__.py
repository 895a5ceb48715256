"""``python -m cmx_core``: the ``cmx`` command (used where no ``cmx`` script is on PATH, such
as the far side of a remote executor started with this interpreter)."""

from cmx_core.cli.main import run_command

raise SystemExit(run_command())
