"""Finding a container engine: Docker's socket or Podman's Docker-compatible socket.

The reachability check and image look-ups use a tiny HTTP client over the unix socket, so
deciding "this image already exists" costs a few milliseconds and never imports the
``docker`` SDK (≈0.3 s); builds and runs go through the SDK (:func:`sdk_client`).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cmx_docker.errors import EngineUnavailable

_TIMEOUT_S = 5.0
_HINT = ("start Docker (`dockerd`, or `systemctl start docker`) or Podman's Docker-compatible "
         "socket (`podman system service --time=0 unix:///run/podman/podman.sock`) and point "
         "DOCKER_HOST at it")


@dataclass(frozen=True)
class Endpoint:
    """A reachable engine API: its URL, its kind (``docker``/``podman``) and version."""

    url: str
    kind: str
    version: str
    api_version: str

    @property
    def runtime(self) -> str:
        """e.g. ``docker 20.10.24+dfsg1`` (recorded in results as ``system.container.runtime``)."""
        return f"{self.kind} {self.version}"


def candidate_urls() -> list[str]:
    """Where to look, in order. ``DOCKER_HOST`` (when set) is the only candidate."""
    explicit = os.environ.get("DOCKER_HOST")
    if explicit:
        return [explicit]
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    return [
        "unix:///var/run/docker.sock",
        f"unix://{runtime_dir}/docker.sock",
        f"unix://{runtime_dir}/podman/podman.sock",
        "unix:///run/podman/podman.sock",
    ]


def _connection(url: str, timeout: float) -> http.client.HTTPConnection:
    if url.startswith("unix://"):
        return _UnixConnection(url[len("unix://"):], timeout)
    if url.startswith(("tcp://", "http://")):
        host = url.split("://", 1)[1].rstrip("/")
        return http.client.HTTPConnection(host, timeout=timeout)
    raise EngineUnavailable(f"DOCKER_HOST={url}: only unix:// and tcp:// engines are supported")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def api_get(url: str, path: str, timeout: float = _TIMEOUT_S) -> tuple[int, Any]:
    """GET ``path`` from the engine at ``url``; returns (status, decoded JSON or text)."""
    conn = _connection(url, timeout)
    try:
        conn.request("GET", path, headers={"Host": "docker"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(body) if body else None
    except ValueError:
        return resp.status, body.decode(errors="replace")


PROBE_TIMEOUT_S = 10.0


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> Endpoint | None:
    """The engine answering at ``url``, or None when nothing answers.

    A missing socket or a refused connection fails at once; ``timeout`` bounds the connection
    and the reply of an engine that is slow to answer. It is generous because Podman's
    ``/version`` reads its storage, which takes seconds on a busy machine (a 2 s bound there
    called a live engine unreachable).
    """
    try:
        status, info = api_get(url, "/version", timeout=timeout)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200 or not isinstance(info, dict):
        return None
    names = " ".join(str(c.get("Name", "")) for c in info.get("Components") or [])
    kind = "podman" if "podman" in names.lower() else "docker"
    return Endpoint(url=url, kind=kind, version=str(info.get("Version", "?")),
                    api_version=str(info.get("ApiVersion", "")))


_FOUND: dict[tuple[str, ...], Endpoint] = {}


def find_endpoint() -> Endpoint:
    """The first reachable engine (memoised per candidate list), else :class:`EngineUnavailable`."""
    urls = tuple(candidate_urls())
    if urls in _FOUND:
        return _FOUND[urls]
    for url in urls:
        endpoint = probe(url)
        if endpoint is not None:
            _FOUND[urls] = endpoint
            return endpoint
    raise EngineUnavailable(f"no container engine reachable (tried {', '.join(urls)}): {_HINT}")


def inspect_image(endpoint: Endpoint, ref: str) -> dict[str, Any] | None:
    """The engine's inspect document of image ``ref``, or None when it does not exist."""
    status, doc = api_get(endpoint.url, f"/images/{quote(ref, safe=':@/')}/json")
    if status == 404:
        return None
    if status != 200 or not isinstance(doc, dict):
        raise EngineUnavailable(f"{endpoint.runtime} at {endpoint.url}: inspecting {ref} "
                                f"answered HTTP {status}: {doc}")
    return doc


def sdk_client(endpoint: Endpoint, timeout: int = 3600) -> Any:
    """A ``docker.DockerClient`` for the endpoint (the SDK is imported here, lazily)."""
    import docker  # deferred: docker only when this runs (239 modules)

    return docker.DockerClient(base_url=endpoint.url, version="auto", timeout=timeout)
