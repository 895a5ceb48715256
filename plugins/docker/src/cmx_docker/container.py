"""Run one container to completion: start it, show its output live on stderr, kill it at
its time limit, report OOM kills, and always remove it."""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass

from cmx_docker import runopts
from cmx_docker.engine import Endpoint, sdk_client
from cmx_docker.errors import ContainerFailed

_NO_LIMIT_S = 30 * 24 * 3600  # the SDK needs some read timeout; a month is "none"


@dataclass(frozen=True)
class InnerRun:
    """How the container ended and everything it printed."""

    exit_code: int
    logs: str
    oom_killed: bool
    timed_out: bool


def run_container(options: runopts.RunOptions, endpoint: Endpoint, echo: bool = True) -> InnerRun:
    """Run ``options`` on ``endpoint``; ``echo`` copies its stderr to ours as it comes."""
    import docker.errors
    import requests

    client = sdk_client(endpoint, timeout=int(options.timeout_s or _NO_LIMIT_S) + 5)
    container = None
    try:
        try:
            container = client.containers.run(**options.sdk_kwargs())
        except docker.errors.APIError as exc:
            reason = " ".join(str(exc.explanation or exc).split())
            raise ContainerFailed(f"{endpoint.runtime} at {endpoint.url} cannot start a container of "
                                  f"{options.labels.get('org.cmx.image', options.image)}: {reason}") from None
        follower = _Follower(container, echo)
        timed_out = False
        try:
            status = container.wait(timeout=options.timeout_s or _NO_LIMIT_S)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            if options.timeout_s is None:
                raise
            container.kill()
            status = container.wait(timeout=60)
            timed_out = True
        follower.join()
        container.reload()
        logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
        oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        return InnerRun(int(status.get("StatusCode", -1)), logs, oom, timed_out)
    finally:
        if container is not None:
            with contextlib.suppress(docker.errors.NotFound):  # already gone is fine
                container.remove(force=True)
        client.close()


class _Follower:
    """Copies the container's stderr to ours while it runs (stdout holds the inner run's
    JSON document); a daemon thread, and the full log is read again at the end, so a
    lagging echo loses nothing."""

    def __init__(self, container: object, echo: bool) -> None:
        self._thread: threading.Thread | None = None
        if echo:
            self._thread = threading.Thread(target=self._copy, args=(container,), daemon=True)
            self._thread.start()

    @staticmethod
    def _copy(container: object) -> None:
        with contextlib.suppress(Exception):  # echo only: never fail the run over it
            stream = container.logs(stream=True, follow=True, stdout=False, stderr=True)  # type: ignore[attr-defined]
            for chunk in stream:
                for line in chunk.decode(errors="replace").splitlines():
                    print(f"  [container] {line}", file=sys.stderr)

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=5)
