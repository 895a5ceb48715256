"""A stand-in for the ``cmind`` package inside cmx-cm's script runner (never installed).

``cmind.access`` is CM's whole API behind one dict-in/dict-out call: the actions scripts call
are served by :mod:`cmx_cm.actions` (download and unzip a file, run a shell command, run or
find another script); any other answers with an error that names it.
"""

from __future__ import annotations

from typing import Any

from . import utils

__all__ = ["access", "utils"]
__version__ = "0.0.0-cmx-cm-shim"


def access(i: dict[str, Any]) -> dict[str, Any]:
    from cmx_cm.actions import access as served  # deferred: the shim is imported before the runner sets it up

    return served(i)
