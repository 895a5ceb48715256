"""The ``docker`` sandbox backend: cmx-core's :class:`~cmx_core.api.SandboxSpec` run in a
container, for what bubblewrap cannot give (GPUs, an image with the program's own
environment). Same spec, same :class:`~cmx_core.api.SandboxResult`, same verdicts.

The container gets: no network (``network_mode=none``); a read-only root file system with a
private ``/tmp`` tmpfs; the work dir as the one writable bind (at ``work_path``, the cwd):
as root, a tmpfs of ``Limits.work_bytes`` mounted on the host, filled from the work dir and
brought back up to ``Limits.keep_bytes`` (cmx-core's ``HostWorkFs``; full: ``disk_limit``),
else the host's work dir itself, with no total bound;
each ``ro_binds`` entry read-only; the spec's user (never root), every capability dropped
and ``no-new-privileges``; memory (swap included), CPUs (``nano_cpus``), pids and
``shm_size`` limits (MLE-bench's container config: ``shm_size`` 4G, ``nano_cpus`` 4e9, GPUs
as a device request for all); ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (the output cap) and no core
dumps; an init as PID 1. stdout and stderr are read while it runs and the run is killed past
the output cap; the wall limit kills it; the container (with every process in it) is removed
at the end, and a killed caller's container is removed by the next run
(:mod:`cmx_docker.reaper`). CPU time and peak memory come from the container's cgroup v1
files while it runs (``None`` where they cannot be read).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.api import Limits, SandboxResult, SandboxSpec, UsageError
from cmx_core.api.sandboxing import Ending, HostWorkFs, check_spec, decide, host_work_unavailable
from cmx_docker.build import ensure_image
from cmx_docker.engine import Endpoint, find_endpoint, sdk_client
from cmx_docker.owner import owner_labels
from cmx_docker.reaper import reap

MLEBENCH_SHM = "4g"
_CGROUP = Path("/sys/fs/cgroup")
_POLL_S = 0.2


@dataclass(frozen=True)
class DockerSandboxSettings:
    """What a container adds to a spec: the image, GPUs (``all``, a count or ids) and /dev/shm."""

    image: str | None = None
    gpus: str | None = None
    shm_size: str = MLEBENCH_SHM


class DockerSandbox:
    """A :class:`cmx_core.api.Sandbox` that runs each spec in a fresh container."""

    name = "docker"

    def __init__(self, settings: DockerSandboxSettings | None = None) -> None:
        self.settings = settings or DockerSandboxSettings(image=os.environ.get("CMX_SANDBOX_IMAGE") or None)

    def available(self) -> str | None:
        try:
            find_endpoint()
        except Exception as exc:  # noqa: BLE001 - one line saying why, whatever the cause
            return str(exc)
        return None

    def run(self, spec: SandboxSpec) -> SandboxResult:
        check_spec(spec)
        if spec.stdin:
            raise UsageError("sandbox stdin is not offered by the docker backend; write the input to a file and "
                             "bind it read-only (ro_binds)")
        endpoint = find_endpoint()
        reap(endpoint)
        work = Path(os.fspath(spec.work_dir))
        bound = spec.limits.work_bytes
        workfs = HostWorkFs(work, bound, spec.limits.keep_bytes) \
            if bound is not None and host_work_unavailable() is None else None
        if workfs is None:
            _hand_over(work, spec.user.uid, spec.user.gid)
        return _Run(spec, self.settings, endpoint, self._image(endpoint), workfs).go()

    def _image(self, endpoint: Endpoint) -> str:
        if self.settings.image:
            return self.settings.image

        return ensure_image("python", endpoint=endpoint).tag


def container_kwargs(spec: SandboxSpec, settings: DockerSandboxSettings, image: str,
                     work_source: Path | None = None) -> dict[str, Any]:
    """``containers.create`` keyword arguments for ``spec`` (checked, never run, in tests);
    ``work_source``: what to bind at the work path instead of the work dir (its bounded tmpfs)."""
    from docker.types import DeviceRequest, Ulimit  # deferred: docker only when this runs (194 modules)

    limits = spec.limits
    volumes = {os.fspath(work_source or spec.work_dir): {"bind": spec.work_path, "mode": "rw"}}
    volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in dict(spec.ro_binds).items()})
    ulimits = [Ulimit(name="core", soft=0, hard=0), Ulimit(name="fsize", soft=limits.output_bytes,
                                                           hard=limits.output_bytes)]
    if limits.cpu_s:
        ulimits.append(Ulimit(name="cpu", soft=int(limits.cpu_s + 0.999), hard=int(limits.cpu_s + 0.999) + 1))
    tmp_size = limits.memory_bytes or 256 << 20
    kwargs: dict[str, Any] = {
        "image": image, "command": list(spec.argv), "user": f"{spec.user.uid}:{spec.user.gid}",
        "environment": spec.full_env(), "working_dir": spec.work_path, "volumes": volumes,
        "network_mode": "none", "read_only": True, "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={tmp_size},mode=1777"},
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "ulimits": ulimits, "init": True,
        "shm_size": settings.shm_size if spec.shm_bytes is None else spec.shm_bytes,
        "labels": {"org.cmx.sandbox": "docker", **owner_labels()},
        "stdin_open": False, "tty": False,
    }
    if limits.memory_bytes:
        kwargs.update(mem_limit=limits.memory_bytes, memswap_limit=limits.memory_bytes)
    if limits.processes:
        kwargs["pids_limit"] = limits.processes
    if limits.cpus:
        kwargs["nano_cpus"] = int(limits.cpus * 1e9)
    request: dict[str, Any] | None = None
    if spec.gpus:  # the spec's own request wins over the backend's settings
        request = {"count": spec.gpus}
    elif settings.gpus:
        request = {"count": -1} if settings.gpus == "all" else (
            {"count": int(settings.gpus)} if settings.gpus.isdigit() else {"device_ids": settings.gpus.split(",")})
    if request is not None:
        kwargs["device_requests"] = [DeviceRequest(capabilities=[["gpu"]], **request)]
    return kwargs


def _hand_over(work: Path, uid: int, gid: int) -> None:
    """As root, give the work dir's tree to the sandbox user (links changed, never followed)."""
    if os.geteuid() != 0:
        return
    for top, dirs, files in os.walk(work):
        for name in [".", *dirs, *files]:
            os.lchown(os.path.join(top, name) if name != "." else top, uid, gid)


class _Output:
    """stdout and stderr read from the attach stream, at most ``cap`` bytes in all."""

    def __init__(self, stream: Any, cap: int) -> None:
        self.out, self.err = bytearray(), bytearray()
        self.cap, self.over = cap, False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        with contextlib.suppress(Exception):  # the stream ends when the container is removed
            for out, err in stream:
                for chunk, into in ((out, self.out), (err, self.err)):
                    if chunk:
                        room = self.cap - len(self.out) - len(self.err)
                        into.extend(chunk[:max(room, 0)])
                        self.over = self.over or len(chunk) > room

    def join(self) -> None:
        self._thread.join(timeout=5)


class _Run:
    def __init__(self, spec: SandboxSpec, settings: DockerSandboxSettings, endpoint: Endpoint, image: str,
                 workfs: HostWorkFs | None) -> None:
        self.spec, self.settings, self.endpoint, self.image = spec, settings, endpoint, image
        self.workfs = workfs
        self.cpu_s: float | None = None
        self.peak: int | None = None

    def go(self) -> SandboxResult:
        import docker.errors  # deferred: docker only when this runs (194 modules)

        workfs = self.workfs
        client = sdk_client(self.endpoint, timeout=60)
        container = None
        try:
            source = self._mount_work()
            container = client.containers.create(**container_kwargs(self.spec, self.settings, self.image, source))
            stream = client.api.attach(container.id, stdout=True, stderr=True, stream=True, logs=True, demux=True)
            output = _Output(stream, self.spec.limits.output_bytes)
            started = time.monotonic()
            container.start()
            if workfs is not None:  # the container's bind holds it now: nothing of it stays on the host's mount table
                workfs.detach()
            stop, code = self._supervise(container, output, started)
            wall = time.monotonic() - started
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            output.join()
            ending = Ending(stop=stop, status=(code & 0xFF) << 8, oom_kills=int(oom), cpu_s=self.cpu_s or 0.0,
                            big_file=self._big_file(), work_full=workfs is not None and workfs.full())
            if workfs is not None:
                workfs.bring_back()
            return self._result(ending, output, wall)
        except docker.errors.APIError as exc:
            reason = " ".join(str(exc.explanation or exc).split())
            return self._result(Ending(stop="exited", status=127 << 8, setup_error=reason), None, 0.0)
        finally:
            if container is not None:
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
            if workfs is not None:
                workfs.close()
            client.close()

    def _mount_work(self) -> Path | None:
        """The work dir's bounded tmpfs on the host (None without one); a mount that fails is the
        sandbox's setup error, a work dir past the bound a UsageError."""
        if self.workfs is None:
            return None
        try:
            return self.workfs.mount(self.spec.user.uid)
        except OSError as exc:
            import docker.errors  # deferred: docker only when this runs (194 modules)

            raise docker.errors.APIError(f"the work dir's tmpfs: {exc}") from exc

    def _supervise(self, container: Any, output: _Output, started: float) -> tuple[str, int]:
        import requests  # deferred: requests only when this runs (130 modules)

        limits: Limits = self.spec.limits
        while True:
            try:
                status = container.wait(timeout=_POLL_S)
                self._sample(container.id)
                return "exited", int(status.get("StatusCode", 1))
            except requests.exceptions.RequestException:
                pass
            self._sample(container.id)
            if self.workfs is not None:
                self.workfs.full()  # remembered: a work dir found full is disk_limit, freed or not
            stop = ("wall" if time.monotonic() - started > limits.wall_s else
                    "cpu" if limits.cpu_s and (self.cpu_s or 0.0) > limits.cpu_s else
                    "output" if output.over else None)
            if stop:
                with contextlib.suppress(Exception):
                    container.kill()
                container.wait(timeout=60)
                return stop, 137

    def _sample(self, cid: str) -> None:
        """CPU time and peak memory from the container's cgroup v1 files (while they exist)."""
        for controller, name in (("cpuacct", "cpuacct.usage"), ("memory", "memory.max_usage_in_bytes")):
            for group in (_CGROUP / controller / "docker" / cid, _CGROUP / controller / "system.slice" /
                          f"docker-{cid}.scope"):
                with contextlib.suppress(OSError, ValueError):
                    value = int((group / name).read_text())
                    if controller == "cpuacct":
                        self.cpu_s = value / 1e9
                    else:
                        self.peak = max(self.peak or 0, value)
                    break

    def _big_file(self) -> bool:
        """A file at the output cap in the work dir (its tmpfs, before it is brought back)."""
        cap = self.spec.limits.output_bytes
        work = Path(self.workfs.at) if self.workfs is not None else Path(os.fspath(self.spec.work_dir))
        return any(p.is_file() and not p.is_symlink() and p.stat().st_size >= cap for p in work.rglob("*"))

    def _result(self, ending: Ending, output: _Output | None, wall: float) -> SandboxResult:
        verdict, exit_code, sig, reason = decide(ending, self.spec.limits)
        enforced = ("wall=deadline", "memory=cgroup", "processes=pids-cgroup", "cpus=nano-cpus",
                    "cpu=rlimit-cpu", "output=stream-cap+rlimit-fsize", "network=none", "root=read-only",
                    *(("work_bytes=host-tmpfs",) if self.workfs is not None else ()))
        return SandboxResult(verdict=verdict, exit_code=exit_code, signal=sig, wall_s=round(wall, 3),
                             cpu_s=self.cpu_s, peak_memory_bytes=self.peak,
                             stdout=bytes(output.out) if output else b"", stderr=bytes(output.err) if output else b"",
                             truncated=bool(output and output.over), reason=reason, backend="docker",
                             enforced=enforced, dropped=self.workfs.dropped if self.workfs is not None else ())
