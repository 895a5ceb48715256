"""Run one script with the real CM (``cmind``) or MLC (``mlcflow``) and write its
``new_env``/``new_state`` as JSON.

Executed by the separate CM or MLC test venv's Python (never imported by cmx):
``python reference_run.py cm|mlc TAGS OUT.json [ENV_JSON]`` (ENV_JSON: the ``env`` input, as
``--env.KEY=VALUE`` on their command lines). MLC reads its scripts where ``MLC_REPOS`` says.
Any failure is written as ``{"error": ...}``.
"""

import importlib
import json
import sys

tool, tags, out = sys.argv[1], sys.argv[2], sys.argv[3]
env = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
request = {"action": "run", "tags": tags, "quiet": True, "env": env}
request.update({"automation": "script", "out": None} if tool == "cm" else {"target": "script"})
try:
    result = importlib.import_module("cmind" if tool == "cm" else "mlc").access(request)
except Exception as exc:  # noqa: BLE001 - mlcflow raises ScriptExecutionError on a failed script
    result = {"return": 1, "error": f"{type(exc).__name__}: {exc}"}
if result.get("return", 1) > 0:
    document = {"error": str(result.get("error"))}
else:
    document = {"new_env": result.get("new_env", {}), "new_state": result.get("new_state", {})}
with open(out, "w") as handle:
    json.dump(document, handle, indent=2, sort_keys=True, default=str)
