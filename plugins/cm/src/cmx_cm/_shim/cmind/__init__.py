"""A stand-in for the ``cmind`` package inside cmx-cm's script runner (never installed).

``cmind.access`` is CM's whole API behind one dict-in/dict-out call; scripts that reach for
it to run other scripts are outside what the bridge runs, so it answers with an error that
says so instead of running anything.
"""

from __future__ import annotations

from typing import Any

from . import utils

__all__ = ["access", "utils"]
__version__ = "0.0.0-cmx-cm-shim"


def access(i: dict[str, Any]) -> dict[str, Any]:
    if i.get("action") == "compare_versions":
        return {"return": 0, "comparison": utils.compare_versions(i["version1"], i["version2"])}
    return {"return": 1, "error": f"cmind.access({i.get('action')!r}) is not available under cmx-cm: "
                                  "express the call as a dep of the recipe"}
