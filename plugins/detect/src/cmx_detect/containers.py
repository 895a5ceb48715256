"""The ``container_engines`` fact: Docker and Podman CLIs, whether their daemon/socket
answers, versions, and GPU runtimes (nvidia runtime, CDI specs, nvidia-ctk)."""

from __future__ import annotations

import json
import re
from typing import Any

from cmx_detect.facts import ContainerEngine, ContainerEngines
from cmx_detect.source import Source

TIMEOUT_S = 10.0
CDI_SPECS = ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml", "/etc/cdi/amd.json")


def _json(text: str) -> Any:
    try:
        return json.loads(text.strip().splitlines()[0]) if text.strip() else None
    except (json.JSONDecodeError, IndexError):
        return None


def docker_socket(src: Source) -> str | None:
    host = src.env("DOCKER_HOST") or ""
    if host.startswith("unix://"):
        return host[len("unix://"):]
    if host:
        return host
    return "/var/run/docker.sock"


def detect_docker(src: Source) -> ContainerEngine | None:
    cli = src.which("docker")
    socket = docker_socket(src)
    if cli is None:
        return None
    result = src.run("docker-version", [cli, "version", "--format", "{{json .}}"], timeout_s=TIMEOUT_S)
    data = _json(result.stdout)
    if not isinstance(data, dict):
        return ContainerEngine("docker", cli, None, None, socket, False,
                               reason=f"docker version: {result.why() if not result.ok else 'unparsable output'}")
    client = (data.get("Client") or {}).get("Version")
    server = (data.get("Server") or {}).get("Version") if data.get("Server") else None
    runtimes: list[str] = []
    if server:
        info = src.run("docker-runtimes", [cli, "info", "--format", "{{json .Runtimes}}"], timeout_s=TIMEOUT_S)
        runtimes = sorted(k for k in (_json(info.stdout) or {}) if "nvidia" in k or "amd" in k)
    reason = None if server else _last_line(result.stderr) or "docker daemon not reachable"
    return ContainerEngine("docker", cli, client, server, socket, bool(server), runtimes + _cdi(src), reason)


def detect_podman(src: Source) -> ContainerEngine | None:
    cli = src.which("podman")
    if cli is None:
        return None
    result = src.run("podman-version", [cli, "version", "--format", "json"], timeout_s=TIMEOUT_S)
    data = _json(result.stdout.replace("\n", " "))
    client = server = None
    if isinstance(data, dict):
        client = (data.get("Client") or {}).get("Version")
        server = (data.get("Server") or {}).get("Version") if data.get("Server") else client
    socket = next((p for p in ("/run/podman/podman.sock",
                               f"{src.env('XDG_RUNTIME_DIR') or '/run/user/0'}/podman/podman.sock")
                   if src.stat(p) is not None), None)
    ok = result.ok and client is not None
    return ContainerEngine("podman", cli, client, server, socket, ok, _cdi(src),
                           None if ok else f"podman version: {result.why()}")


def _cdi(src: Source) -> list[str]:
    return [f"cdi:{p}" for p in CDI_SPECS if src.stat(p) is not None]


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else None


def nvidia_ctk_version(src: Source) -> str | None:
    ctk = src.which("nvidia-ctk")
    if not ctk:
        return None
    result = src.run("nvidia-ctk-version", [ctk, "--version"], timeout_s=TIMEOUT_S)
    match = re.search(r"version\s+([\d.]+)", result.stdout)
    return match.group(1) if match else None


def detect_container_engines(src: Source) -> ContainerEngines:
    engines = [e for e in (detect_docker(src), detect_podman(src)) if e is not None]
    return ContainerEngines(engines=engines, nvidia_container_toolkit=nvidia_ctk_version(src))
