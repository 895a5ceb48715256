"""The multi-node test bed of ``scripts/services/netbed.sh`` seen from Python: start it, run
commands inside a node's namespaces, stop it by PID (docs/testbed.md).

The tests under ``tests/netbed/`` get one bed for the session from their ``conftest.py``;
a test that needs a bed of its own (the one that stops it) calls :func:`start` itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "services" / "netbed.sh"
PREFIX = "cmxnb-"
"""Every namespace the bed makes is named ``cmxnb-<token>-...``."""


@dataclass(frozen=True)
class Node:
    """One node: its number (1-based), hostname, address and namespaces (the network one by
    name, the UTS and mount ones by the files that keep them)."""

    index: int
    hostname: str
    address: str
    netns: str
    uts: Path
    mnt: Path


@dataclass(frozen=True)
class Bed:
    """A running bed, as its ``netbed.env`` describes it."""

    work: Path
    token: str
    nodes: tuple[Node, ...]
    slurm_conf: Path
    ray_address: str
    munged_pid: int
    slurmctld_pid: int
    watch_pid: int

    @property
    def hub(self) -> str:
        """The namespace that holds the bridge."""
        return f"{PREFIX}{self.token}-hub"

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.hub, *(node.netns for node in self.nodes))

    def argv(self, node: int, argv: list[str]) -> list[str]:
        """``argv`` run inside node ``node``'s network, UTS and mount namespaces."""
        entry = self.nodes[node - 1]
        return ["nsenter", f"--net=/run/netns/{entry.netns}", f"--uts={entry.uts}", f"--mount={entry.mnt}", "--",
                *argv]

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment for the bed's Slurm and Ray (and ``extra``).

        Ray's platform variable is dropped: the suite's single-node tests set it to keep Ray on
        127.0.0.1, which would make a join across nodes impossible."""
        env = {**os.environ, "PATH": tool_path(), "SLURM_CONF": str(self.slurm_conf), "RAY_AUTH_MODE": "disabled",
               "RAY_USAGE_STATS_ENABLED": "0", **extra}
        env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        env.pop("RAY_ADDRESS", None)
        return env

    def run(self, node: int, argv: list[str], timeout: float = 120.0,
            **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on node ``node`` and wait (``timeout`` seconds at most)."""
        return subprocess.run(self.argv(node, argv), capture_output=True, text=True, timeout=timeout,
                              check=False, env=self.env(**extra))

    def popen(self, node: int, argv: list[str], log: Path, **extra: str) -> subprocess.Popen[bytes]:
        """Start ``argv`` on node ``node``, its output into ``log``."""
        with log.open("wb") as out:
            return subprocess.Popen(self.argv(node, argv), stdout=out, stderr=subprocess.STDOUT,
                                    env=self.env(**extra))


def tool_path() -> str:
    """PATH with this interpreter's bin folder first: ``ray`` and ``torchrun`` come with the
    virtual environment, which scripts/test.sh runs without activating it."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def why_not() -> str | None:
    """Why this machine cannot make a bed, or None when it can."""
    if os.geteuid() != 0:
        return "the test bed needs root (network namespaces, munged as the munge user)"
    for tool in ("ip", "nsenter", "unshare", "munged", "slurmctld", "slurmd", "ray", "torchrun"):
        if not shutil.which(tool, path=tool_path()):
            return f"the test bed needs `{tool}` on PATH"
    probe = subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True, text=True, timeout=30,
                           check=False)
    if probe.returncode != 0:
        return f"cannot make network namespaces here: {probe.stderr.strip()[:200]}"
    return None


def read_env(work: Path) -> dict[str, str]:
    """The KEY=VALUE lines of ``work/netbed.env``."""
    lines = (work / "netbed.env").read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _bed(work: Path) -> Bed:
    values = read_env(work)
    token, subnet = values["CMX_NETBED_TOKEN"], values["CMX_NETBED_SUBNET"]
    nodes = tuple(Node(i, f"cmxn{i}", f"{subnet}.{i}", f"{PREFIX}{token}-n{i}", work / "ns" / f"uts-n{i}",
                       work / "ns" / f"mnt-n{i}") for i in range(1, int(values["CMX_NETBED_NODES"]) + 1))
    return Bed(work, token, nodes, Path(values["CMX_NETBED_SLURM_CONF"]), values["CMX_NETBED_RAY_ADDRESS"],
               int(values["CMX_NETBED_MUNGED_PID"]), int(values["CMX_NETBED_SLURMCTLD_PID"]),
               int(values["CMX_NETBED_WATCH_PID"]))


def start(work: Path, nodes: int = 2, ray: bool = True, owner: int | None = None, timeout: float = 300.0,
          head_cpus: int = 1) -> Bed:
    """``cmx_netbed_start work nodes``; RuntimeError with the script's last words when it fails
    (the script has then removed what it made). The bed stops by itself once process ``owner``
    (default: this one) is gone, should nobody stop it before. ``head_cpus``: the Ray head's
    CPUs (0: tasks run on the worker nodes only)."""
    env = {**os.environ, "PATH": tool_path(), "CMX_NETBED_RAY": "1" if ray else "0",
           "CMX_NETBED_OWNER_PID": str(os.getpid() if owner is None else owner),
           "CMX_NETBED_RAY_HEAD_CPUS": str(head_cpus)}
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    env.pop("SLURM_CONF", None)
    proc = subprocess.run(["bash", "-c", 'source "$1" && cmx_netbed_start "$2" "$3"', "driver", str(SCRIPT),
                           str(work), str(nodes)], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cmx_netbed_start failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return _bed(work)


def stop(work: Path, timeout: float = 120.0) -> None:
    """``cmx_netbed_stop work``: every process in the bed's namespaces and munged by PID, then the
    namespaces (with their veths and bridge) and the mounts that kept the UTS and mount ones."""
    proc = subprocess.run(["bash", "-c", 'source "$1" && cmx_netbed_stop "$2"', "driver", str(SCRIPT), str(work)],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"cmx_netbed_stop failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")


def namespaces_named(token: str) -> list[str]:
    """The network namespaces on this machine whose name carries ``token``."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=True)
    return [line.split()[0] for line in listing.stdout.splitlines() if line.strip() and token in line.split()[0]]


def pids_in(netns: str) -> list[int]:
    """The processes in network namespace ``netns``."""
    listing = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=30,
                             check=False)
    return [int(pid) for pid in listing.stdout.split()]
