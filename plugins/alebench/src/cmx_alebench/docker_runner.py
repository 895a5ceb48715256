"""The docker judge: a fresh ``docker run`` per compile, case and tester call, as ALE-Bench
judges (§3.3), for a side-by-side comparison with the sandbox.

Inside the container the program runs as ``timeout <wall> prlimit --cpu=<cpu> --fsize=<out>
/usr/bin/time -f ... -o /judge/profile <program> < /judge/stdin > /judge/stdout``: one CPU,
no network, uid 65534, the call's memory bound plus headroom for the shell and ``time``.
The image needs no registry: a skeleton root (``/etc/passwd``, the merged-usr links, empty
mount points) imported from an in-memory tarball, with the host's ``/usr`` mounted
read-only, so the container runs the same compilers and interpreters as the sandbox.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from cmx_alebench.runner import Call, Ending, Ran
from cmx_core.errors import UsageError

JUDGE_IMAGE = "cmx-alebench-judge:host-usr"
UID = 65534
HEADROOM_BYTES = 64 << 20
"""Memory above the call's bound for ``sh``, ``timeout`` and ``time``; MLE is still judged against the bound."""
START_SLACK_S = 60.0
"""How much longer than the wall limit a container may take (image start, mounts) before it is killed."""
PROFILE_FORMAT = "%e %U %S %M %x"
_SIGNAL = re.compile(r"Command terminated by signal (\d+)")
_SCRIPT = ('exec /usr/bin/timeout {wall} /usr/bin/prlimit --cpu={cpu} --fsize={fsize} --core=0 '
           '/usr/bin/time -f "{fmt}" -o /judge/profile "$@" < /judge/stdin > /judge/stdout 2> /judge/stderr')


def skeleton_tar() -> bytes:
    """The judge image's root: a passwd and group naming uid 65534, merged-usr links, mount points."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, mode in (("etc", 0o755), ("tmp", 0o1777), ("usr", 0o755), ("work", 0o755), ("judge", 0o755),
                           ("sol", 0o755), ("tools", 0o755), ("rust", 0o755), ("proc", 0o755), ("dev", 0o755)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for link in ("bin", "lib", "lib64", "sbin"):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(info)
        for name, text in (("etc/passwd", f"root:x:0:0::/:/bin/sh\nnobody:x:{UID}:{UID}::/work:/bin/sh\n"),
                           ("etc/group", f"root:x:0:\nnogroup:x:{UID}:\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def ensure_image(client: Any, ref: str = JUDGE_IMAGE) -> str:
    """Import the skeleton image unless the engine has it; return its reference."""
    import docker.errors  # deferred: docker only when this runs (259 modules)

    try:
        client.images.get(ref)
        return ref
    except docker.errors.ImageNotFound:
        pass
    repository, tag = ref.rsplit(":", 1)
    client.api.import_image_from_data(skeleton_tar(), repository=repository, tag=tag)
    client.images.get(ref)
    return ref


def container_config(call: Call, meta_dir: Path, image: str = JUDGE_IMAGE, host_usr: bool = True) -> dict[str, Any]:
    """The keyword arguments of ``containers.run`` for one call (pure: tested without an engine).
    ``host_usr=False`` runs the image's own ``/usr`` (the ``ale-bench-judge`` toolchain image)."""
    from docker.types import Mount  # deferred: docker only when this runs (259 modules)

    limits = call.limits
    script = _SCRIPT.format(wall=f"{limits.wall_s:g}", cpu=int(limits.cpu_s + 0.999), fsize=limits.output_bytes,
                            fmt=PROFILE_FORMAT)
    mounts = [*([Mount("/usr", "/usr", type="bind", read_only=True)] if host_usr else []),
              Mount("/work", os.fspath(call.work_dir), type="bind"),
              Mount("/judge", os.fspath(meta_dir), type="bind"),
              *(Mount(inside, host, type="bind", read_only=True) for host, inside in call.binds.items())]
    memory = limits.memory_bytes + HEADROOM_BYTES
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           **call.env}
    return {"image": image, "command": ["/usr/bin/sh", "-c", script, "sh", *call.argv], "detach": True,
            "network_mode": "none", "network_disabled": True, "nano_cpus": 1_000_000_000, "mem_limit": memory,
            "memswap_limit": memory, "pids_limit": limits.processes, "user": f"{UID}:{UID}",
            "working_dir": "/work", "mounts": mounts, "environment": env, "tmpfs": {"/tmp": "size=512m,mode=1777"},
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "read_only": True}


ENFORCED_BY = {"wall_s": "deadline", "cpu_s": "rlimit", "memory": "cgroup", "processes": "pids-cgroup",
               "cpus": "nano-cpus", "file_size": "rlimit", "network": "none"}
"""How the container judge enforces each limit (``container_config``: the engine's memory and pids
cgroups, one CPU in nano-CPUs, ``ulimit`` in the shell for CPU time and file size)."""


class DockerRunner:
    """Runs each call in its own container on the engine ``DOCKER_HOST`` names (or the default one)."""

    name = "docker"
    enforced_by = ENFORCED_BY

    def __init__(self, image: str = JUDGE_IMAGE, host_usr: bool = True) -> None:
        try:
            import docker  # deferred: optional docker, only when this runs
        except ImportError:
            raise UsageError("--judge docker needs the docker SDK: pip install 'cmx-alebench[docker]'") from None
        try:
            self.client = docker.from_env(timeout=120)
            self.client.ping()
        except Exception as exc:  # noqa: BLE001 - any engine failure is one usage line
            raise UsageError(f"--judge docker: no container engine answers at "
                             f"{os.environ.get('DOCKER_HOST', 'the default socket')} ({exc}); start one or use "
                             "--judge sandbox") from None
        self.host_usr = host_usr
        self.image = ensure_image(self.client, image) if host_usr else image

    def run(self, call: Call) -> Ran:
        with tempfile.TemporaryDirectory(prefix="judge-") as meta:
            meta_dir = Path(meta)
            (meta_dir / "stdin").write_bytes(call.stdin)
            _hand_over(call.work_dir, meta_dir)
            started = time.monotonic()
            container = self.client.containers.run(**container_config(call, meta_dir, self.image, self.host_usr))
            try:
                timed_out = False
                try:
                    status = container.wait(timeout=call.limits.wall_s + START_SLACK_S)
                except Exception:  # noqa: BLE001 - the SDK raises a requests timeout
                    container.kill()
                    timed_out, status = True, {"StatusCode": 137}
                wall = time.monotonic() - started
                oom = bool(container.attrs and self._oom(container))
            finally:
                container.remove(force=True)
            return read_outcome(meta_dir, int(status.get("StatusCode", 1)), wall, oom, timed_out, call)

    @staticmethod
    def _oom(container: Any) -> bool:
        container.reload()
        return bool(container.attrs.get("State", {}).get("OOMKilled"))


def _hand_over(*folders: Path) -> None:
    """Give the call's writable folders to uid 65534 (links themselves, never their targets)."""
    if os.geteuid() != 0:
        return
    for folder in folders:
        os.lchown(folder, UID, UID)
        for parent, dirs, files in os.walk(folder):
            for name in dirs + files:
                os.lchown(os.path.join(parent, name), UID, UID)


def _read(path: Path, cap: int) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(cap)
    except OSError:
        return b""


def read_outcome(meta: Path, code: int, wall: float, oom: bool, timed_out: bool, call: Call) -> Ran:
    """A :class:`Ran` from the container's exit status and the files ``time`` and the shell left."""
    cap = call.limits.output_bytes
    stdout, stderr = _read(meta / "stdout", cap), _read(meta / "stderr", cap)
    profile = _read(meta / "profile", 1 << 16).decode(errors="replace").strip().splitlines()
    elapsed, cpu, memory, exit_code = wall, None, None, code
    if profile:
        fields = profile[-1].split()
        if len(fields) == 5:
            elapsed, cpu = float(fields[0]), float(fields[1]) + float(fields[2])
            memory, exit_code = int(fields[3]) * 1024, int(fields[4])
    signal = next((int(m.group(1)) for line in profile if (m := _SIGNAL.search(line))), None)
    size = sum(p.stat().st_size for p in (meta / "stdout", meta / "stderr") if p.exists())
    ending, reason = _ending(code, signal, oom, timed_out, size >= cap, exit_code)
    return Ran(ending=ending, exit_code=None if signal else exit_code, wall_s=elapsed, cpu_s=cpu,
               memory_bytes=memory, stdout=stdout, stderr=stderr, reason=reason)


def _ending(code: int, signal: int | None, oom: bool, timed_out: bool, full: bool,
            exit_code: int) -> tuple[Ending, str]:
    if oom:     # the memory cgroup's kill decides before any time verdict (a slowed hog is MLE, not TLE)
        return Ending.MEMORY, "the container's memory cgroup killed the program"
    if timed_out or code in (124, 137):
        return Ending.TIME, f"timeout ended the program (container exit {code})"
    if signal == 24:
        return Ending.TIME, "CPU-time limit reached (SIGXCPU)"
    if signal == 25 or (full and exit_code != 0):
        return Ending.OUTPUT, "output reached the file-size limit"
    if signal is not None:
        return Ending.SIGNALED, f"killed by signal {signal}"
    return Ending.EXITED, f"exited with {exit_code}"
