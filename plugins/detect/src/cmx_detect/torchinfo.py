"""The ``torch`` fact, probed in a subprocess of the same interpreter (cmx never imports torch:
it is slow to import and may initialise CUDA).

Without GPU device nodes (``/dev/nvidia*``, ``/dev/kfd``, ``/dev/dxg``) torch cannot see a
device, so the probe reads ``torch/version.py`` instead of importing torch (``probe:
"version.py"``, milliseconds instead of seconds); with them it imports torch and asks it
(``probe: "import"``). ``CMX_TORCH_PROBE=import`` forces the import.
"""

from __future__ import annotations

import json

from cmx_detect.facts import TorchFacts
from cmx_detect.source import Source, python_value

TORCH_TIMEOUT_S = 90.0

PROBE_SCRIPT = r"""
import importlib.util, json, os
spec = importlib.util.find_spec("torch")
out = {"installed": spec is not None}
gpu_nodes = any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg"))
gpu_nodes = gpu_nodes or os.environ.get("CMX_TORCH_PROBE") == "import"
if spec is not None and not gpu_nodes and spec.submodule_search_locations:
    ns = {}
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    with open(path) as fh:
        exec(compile(fh.read(), path, "exec"), ns)
    out.update(version=ns.get("__version__"), cuda_build=ns.get("cuda"), hip_build=ns.get("hip"),
               cudnn_version=None, cuda_available=False, device_count=0, devices=[], probe="version.py")
elif out["installed"]:
    out["probe"] = "import"
    import torch
    out.update(version=torch.__version__, cuda_build=torch.version.cuda,
               hip_build=getattr(torch.version, "hip", None))
    try:
        out["cudnn_version"] = torch.backends.cudnn.version()
    except Exception:
        out["cudnn_version"] = None
    out["cuda_available"] = bool(torch.cuda.is_available())
    n = torch.cuda.device_count() if out["cuda_available"] else 0
    out["device_count"] = n
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(n)]
print("CMX-TORCH " + json.dumps(out))
"""


def parse_probe(stdout: str) -> TorchFacts:
    """The ``CMX-TORCH {json}`` line of the probe (torch may print warnings around it)."""
    for line in stdout.splitlines():
        if line.startswith("CMX-TORCH "):
            data = json.loads(line[len("CMX-TORCH "):])
            if not isinstance(data, dict):
                break
            return TorchFacts(
                installed=bool(data.get("installed")), version=data.get("version"),
                cuda_build=data.get("cuda_build"), hip_build=data.get("hip_build"),
                cudnn_version=data.get("cudnn_version"), cuda_available=data.get("cuda_available"),
                device_count=int(data.get("device_count") or 0), devices=list(data.get("devices") or []),
                probe=data.get("probe"),
                reason=None if data.get("installed") else "torch is not installed in this interpreter",
            )
    raise ValueError("no CMX-TORCH line in the probe output")


def detect_torch(src: Source) -> TorchFacts:
    python = src.value("python", python_value)["executable"]
    result = src.run("torch", [python, "-c", PROBE_SCRIPT], timeout_s=TORCH_TIMEOUT_S)
    if not result.ok:
        return TorchFacts(installed=False, reason=f"torch probe failed: {result.why()}")
    try:
        return parse_probe(result.stdout)
    except (ValueError, TypeError) as err:
        return TorchFacts(installed=False, reason=f"cannot parse torch probe output: {err}")
