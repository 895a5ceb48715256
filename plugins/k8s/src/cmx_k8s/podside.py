"""What runs in the pod: the far cmx command, then its run directory framed into the log.

How the result comes back from a pod: the container's command is ``python3 -c <this
file's source> MAX_BYTES OUT_DIR CMX...``. It runs cmx (its output streams to the log as
usual), then prints one frame at the end of the log::

    === cmx-k8s result v1 begin ===
    <base64 of gzip(JSON {"exit_code": N, "files": {relative path: base64}, "error": ""})>
    === cmx-k8s result v1 end ===

which the near side's ``fetch`` reads from the pod log and unpacks into ``<run>/remote``.
Nothing else is needed on the cluster (no shared volume, no object store); the size is
bounded (``max_result_mb``, under the kubelet's 10 MiB log rotation). This file imports only
the standard library: the image need not have cmx-k8s installed. It exits with cmx's code,
or 2 when the far run failed on a step that refused its input (its last attempt's fault is
``bad_input``), so that the Job's ``podFailurePolicy`` fails it at once instead of running
the pod again (docs/faults.md: exit code 2 is never retried).
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from pathlib import Path

BEGIN = "=== cmx-k8s result v1 begin ==="
END = "=== cmx-k8s result v1 end ==="


def frame(exit_code: int, out_dir: Path, max_bytes: int) -> str:
    """The frame of ``out_dir``'s files (an error instead when they exceed ``max_bytes``)."""
    paths = sorted(p for p in out_dir.rglob("*") if p.is_file() and not p.is_symlink()) if out_dir.is_dir() else []
    total = sum(p.stat().st_size for p in paths)
    files: dict[str, str] = {}
    error = ""
    if total > max_bytes:
        error = (f"the far run directory holds {total / 1e6:.1f} MB, more than max_result_mb={max_bytes / 1e6:g}; "
                 "raise max_result_mb or keep large outputs on the PVC")
    else:
        files = {str(p.relative_to(out_dir)): base64.b64encode(p.read_bytes()).decode() for p in paths}
    body = base64.b64encode(gzip.compress(json.dumps({"exit_code": exit_code, "files": files,
                                                      "error": error}).encode())).decode()
    lines = [body[i:i + 76] for i in range(0, len(body), 76)]
    return "\n".join([BEGIN, *lines, END])


def main(argv: list[str]) -> int:
    max_bytes, out_dir, command = int(argv[0]), Path(argv[1]), argv[2:]
    code = subprocess.call(command, stdin=subprocess.DEVNULL)
    sys.stdout.flush()
    print("\n" + frame(code, out_dir, max_bytes), flush=True)
    return 2 if code != 0 and refused_input(out_dir) else code


def refused_input(out_dir: Path) -> bool:
    """True when the far result's last failed attempt is ``bad_input``."""
    try:
        document = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    faults = [a.get("fault") for a in document.get("attempts") or () if isinstance(a, dict) and a.get("fault")]
    return bool(faults) and faults[-1] == "bad_input"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
