"""Run one script with the real CM (``cmind``) and write its ``new_env``/``new_state`` as JSON.

Executed by the separate CM test venv's Python (never imported by cmx):
``python cm_reference.py TAGS OUT.json [ENV_JSON]`` (ENV_JSON: CM's ``env`` input). Any failure
is written as ``{"error": ...}``.
"""

import json
import sys

import cmind

tags, out = sys.argv[1], sys.argv[2]
env = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
result = cmind.access({"action": "run", "automation": "script", "tags": tags, "quiet": True, "out": None, "env": env})
if result.get("return", 1) > 0:
    document = {"error": str(result.get("error"))}
else:
    document = {"new_env": result.get("new_env", {}), "new_state": result.get("new_state", {})}
with open(out, "w") as handle:
    json.dump(document, handle, indent=2, sort_keys=True, default=str)
