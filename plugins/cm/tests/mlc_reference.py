"""Run one script with the real MLC (``mlcflow``) and write its ``new_env``/``new_state`` as JSON.

Executed by the separate MLC test venv's Python (never imported by cmx), with ``MLC_REPOS``
set to a directory whose ``local/script`` holds the scripts:
``python mlc_reference.py TAGS OUT.json [ENV_JSON]`` (ENV_JSON: MLC's ``env`` input).
Any failure is written as ``{"error": ...}``.
"""

import json
import sys

import mlc

tags, out = sys.argv[1], sys.argv[2]
env = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
try:
    result = mlc.access({"action": "run", "target": "script", "tags": tags, "quiet": True, "env": env})
except Exception as exc:  # noqa: BLE001 - mlcflow raises ScriptExecutionError on a failed script
    result = {"return": 1, "error": f"{type(exc).__name__}: {exc}"}
if result.get("return", 1) > 0:
    document = {"error": str(result.get("error"))}
else:
    document = {"new_env": result.get("new_env", {}), "new_state": result.get("new_state", {})}
with open(out, "w") as handle:
    json.dump(document, handle, indent=2, sort_keys=True, default=str)
