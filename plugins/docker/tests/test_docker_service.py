"""scripts/services/docker.sh: start a private dockerd, use it, stop it by PID."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "services" / "docker.sh"

DRIVER = """
set -u
source "$1"
W=$(mktemp -d /tmp/cmxsvc-XXXX)
cmx_docker_start "$W" || exit 3
echo "HOST=$DOCKER_HOST"
PID=$CMX_DOCKERD_PID
echo "PID=$PID"
python3 - "$W" <<'PY'
import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1] + "/docker.sock")
c = C("localhost"); c.request("GET", "/_ping"); print("PING=" + c.getresponse().read().decode())
PY
cmx_docker_stop
if kill -0 "$PID" 2>/dev/null; then echo "still running"; exit 4; fi
echo "STOPPED HOST=${DOCKER_HOST:-unset}"
rm -rf "$W"
[ ! -e "$W" ] && echo "REMOVED"
"""


def test_service_script_starts_and_stops_a_private_dockerd() -> None:
    if os.geteuid() != 0 and shutil.which("dockerd") is None:
        reason = "dockerd is not installed and this user cannot install it"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    proc = subprocess.run(["bash", "-c", DRIVER, "driver", str(SCRIPT)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("HOST=unix:///tmp/cmxsvc-") and lines[0].endswith("/docker.sock")
    assert lines[1].startswith("PID=") and int(lines[1][4:]) > 0
    assert "PING=OK" in lines and "STOPPED HOST=unset" in lines
    assert "REMOVED" in lines  # nothing left mounted under the work directory
