"""The ``cmx`` command in-process, for a plugin's tests (re-exported on purpose).

``main(argv) -> exit code`` is the function behind ``cmx``: a test runs a command with it and
reads what it printed with pytest's ``capsys``, in the same process as its fixtures (an
isolated ``CMX_HOME``, a fake cluster), where ``python -m cmx_core`` in a subprocess would
not see them. The kit sits below ``cli`` in the layer contract; this one import up is the
contract's single, named exception (``ignore_imports`` in pyproject's ``[tool.importlinter]``).
"""

from __future__ import annotations

from cmx_core.cli.main import main

__all__ = ["main"]
