"""One container as a job: created with its owner's labels, started, waited for (killed at its
time limit, its OOM kill noticed), its logs read, cancelled on Ctrl-C, and always removed: a
container that cannot start is removed at once, and one whose cmx process was killed is
removed by the next start (:mod:`cmx_docker.reaper`). An engine that fails mid-run is a
:class:`ContainerFailed` naming it, never a traceback."""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import Any

from cmx_docker import runopts
from cmx_docker.engine import Endpoint, sdk_client
from cmx_docker.errors import ContainerFailed
from cmx_docker.limits import AppliedLimits, applied_limits
from cmx_docker.owner import owner_labels

_NO_LIMIT_S = 30 * 24 * 3600  # the SDK needs some read timeout; a month is "none"


@dataclass(frozen=True)
class JobEnd:
    """How the container ended and everything it printed."""

    exit_code: int
    logs: str
    oom_killed: bool
    timed_out: bool


class ContainerJob:
    """A started container; :meth:`wait` ends it (and removes it), :meth:`cancel` kills it."""

    def __init__(self, client: Any, container: Any, timeout_s: float | None, echo: bool,
                 limits: AppliedLimits | None = None) -> None:
        self._client = client
        self._container = container
        self.limits = limits
        """What the engine applied (read back after the start), for ``system.container.limits``."""
        self._timeout_s = timeout_s
        self._follower = _Follower(container, echo)
        self._logs = ""

    def wait(self) -> JobEnd:
        import docker.errors  # deferred: docker only when this runs (197 modules)
        import requests  # deferred: requests only when this runs (130 modules)

        try:
            return self._wait()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            reason = " ".join(str(getattr(exc, "explanation", None) or exc).split())[:300]
            raise ContainerFailed(f"the container engine failed while running {self._container.name}: "
                                  f"{reason}; check the engine (docker info) and run again") from None
        finally:
            self.remove()

    def _wait(self) -> JobEnd:
        import requests  # deferred: requests only when this runs (130 modules)

        timed_out = False
        try:
            status = self._container.wait(timeout=self._timeout_s or _NO_LIMIT_S)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            if self._timeout_s is None:
                raise
            self._container.kill()
            status = self._container.wait(timeout=60)
            timed_out = True
        self._follower.join()
        self._container.reload()
        self._logs = self._container.logs(stdout=True, stderr=True).decode(errors="replace")
        oom = bool(self._container.attrs.get("State", {}).get("OOMKilled"))
        return JobEnd(int(status.get("StatusCode", -1)), self._logs, oom, timed_out)

    def logs(self) -> str:
        """Everything the container printed (read by :meth:`wait`)."""
        return self._logs

    def cancel(self) -> None:
        import docker.errors  # deferred: docker only when this runs (197 modules)

        with contextlib.suppress(docker.errors.APIError):
            self._container.kill()
        self.remove()

    def remove(self) -> None:
        import docker.errors  # deferred: docker only when this runs (197 modules)

        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):  # already gone is fine
            self._container.remove(force=True)
        self._client.close()


def start_container(options: runopts.RunOptions, endpoint: Endpoint, echo: bool = True) -> ContainerJob:
    """Start ``options`` detached on ``endpoint``; a ContainerFailed names the engine and why."""
    import docker.errors  # deferred: docker only when this runs (197 modules)

    client = sdk_client(endpoint, timeout=int(options.timeout_s or _NO_LIMIT_S) + 5)
    kwargs = options.sdk_kwargs()
    kwargs.pop("detach", None)
    kwargs["labels"] = {**kwargs.get("labels", {}), **owner_labels()}
    container = None
    try:
        container = client.containers.create(**kwargs)
        container.start()
        container.reload()
        limits = applied_limits(container.attrs.get("HostConfig") or {},
                                options.gpus if options.cdi_devices else None)
    except docker.errors.APIError as exc:
        if container is not None:  # created but not started (a GPU runtime missing...): remove it
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        client.close()
        reason = " ".join(str(exc.explanation or exc).split())
        raise ContainerFailed(f"{endpoint.runtime} at {endpoint.url} cannot start a container of "
                              f"{options.labels.get('org.cmx.image', options.image)}: {reason}") from None
    return ContainerJob(client, container, options.timeout_s, echo, limits)


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
