"""An ordinary ``ray start`` cluster, as a user starts one, and one cmx run on it, inside a
network namespace of its own (run under ``unshare --net --fork``):

    python usercluster.py WORK_DIR

The namespace gets loopback and a veth pair whose one end has :data:`NODE_IP` and the default
route, like a machine's network card: a head started the ordinary way (none of Ray's
variables, so not :data:`cmx_ray.cluster.RAY_ENV`) advertises that address, not 127.0.0.1, which
is the cluster a driver with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` could not join. Nothing it
starts can reach past the namespace (the veth's other end is in it too, and routes nowhere).

The head (``ray start --head --block --port P --temp-dir WORK_DIR/ray``, with HOME in
WORK_DIR so ``~/.ray`` is its own) is stopped by its PID with SIGTERM, then whatever is left of
it, found by a variable only its processes carry, with SIGKILL. Prints one JSON line: the
address the head advertised, cmx's exit code, stdout and the tail of its stderr, and the PIDs
left (none). Exit code 77: the namespace could not be made (the test skips, saying why)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

NODE_IP = "198.51.100.10"
"""A documentation address (TEST-NET-2), inside the namespace only."""
MARK = "CMX_TEST_USER_RAY"
NETWORK = (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", "cmx0", "type", "veth", "peer", "name", "cmx1"],
           ["ip", "addr", "add", f"{NODE_IP}/24", "dev", "cmx0"], ["ip", "link", "set", "cmx0", "up"],
           ["ip", "link", "set", "cmx1", "up"], ["ip", "route", "add", "default", "dev", "cmx0"])
START_S = 120.0
CMX_S = 240.0


def user_env(work: Path) -> dict[str, str]:
    """This environment without any of Ray's variables (a user's shell), HOME in ``work``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(work / "home"), MARK: str(work)}


def marked(work: Path) -> list[int]:
    """PIDs whose environment carries this cluster's mark."""
    found = []
    needle = f"{MARK}={work}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with suppress(OSError):
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    return found


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(head: subprocess.Popen[bytes], work: Path) -> list[int]:
    """SIGTERM to the head, then SIGKILL to what is left of it; the PIDs still there after."""
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait()
    deadline = time.monotonic() + 30
    while (left := marked(work)) and time.monotonic() < deadline:
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    return marked(work)


def advertised(log: Path) -> str:
    """The node address the head's log names (``Local node IP: X``), colours removed."""
    found = re.search(r"Local node IP: ([0-9.]+)", re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace")))
    return found.group(1) if found else ""


def main(work: Path) -> int:
    for command in NETWORK:
        made = subprocess.run(command, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            print(f"cannot make the namespace's network ({' '.join(command)}): {made.stderr.strip()}", file=sys.stderr)
            return 77
    env = user_env(work)
    (work / "home").mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = work / "head.log"
    ray = str(Path(sys.executable).parent / "ray")
    with open(log_path, "wb") as log:
        head = subprocess.Popen([ray, "start", "--head", "--block", f"--port={port}", f"--temp-dir={work / 'ray'}",
                                 "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"],
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_S
        while not listening(port) and head.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        address = f"127.0.0.1:{port}"
        cmx = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=demo,sort",
                              "--executor", "ray", "--executor-opt", f"address={address}",
                              "--executor-opt", "env=CMX_HOME", "--json"],
                             env={k: v for k, v in env.items() if k != MARK}, capture_output=True, text=True,
                             timeout=CMX_S, check=False)
    finally:
        left = stop(head, work)
    print(json.dumps({"address": address, "node_ip": advertised(log_path), "rc": cmx.returncode,
                      "stdout": cmx.stdout, "stderr": cmx.stderr[-3000:], "left": left}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
