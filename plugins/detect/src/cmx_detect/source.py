"""Where detectors get their raw answers: the live machine, or a recorded fixture.

Detectors never call ``subprocess``, ``open`` or ``pynvml`` directly; they ask a
:class:`Source`. :class:`LiveSource` runs every external program in a subprocess with a
timeout (its own session, killed as a group on timeout) and reads the real file system;
:class:`cmx_detect.replay.FixtureSource` answers the same questions from recorded files. The
parsing code after the source is the same for both.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from abc import ABC, abstractmethod
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # import-light: cmx-core's warm-run replay checks fingerprints through this
    import subprocess
    from collections.abc import Callable, Sequence
    from typing import Any

    from cmx_detect.nvml import NvmlSession

DEFAULT_TIMEOUT_S = 10.0
NVML_TIMEOUT_S = 30.0

# Runs in a child interpreter: every NVML query cmx-detect makes, recorded as JSON. The parent
# replays the recording through the same parsing code, so a wedged driver costs a timeout,
# never a hung cmx, and cmx itself never loads libnvidia-ml.
NVML_CHILD = r"""
import json
from cmx_detect.nvidia import from_nvml
from cmx_detect.nvml import LiveNvml, NvmlCallError, RecordingNvml
calls = {}
try:
    live = LiveNvml()
except NvmlCallError as err:
    calls["nvmlInit()"] = {"error": err.name, "message": str(err), "value": err.value}
else:
    calls["nvmlInit()"] = None
    session = RecordingNvml(live, calls)
    try:
        from_nvml(session)
    except NvmlCallError:
        pass
    finally:
        session.close()
print("CMX-NVML " + json.dumps({"calls": calls}))
"""
MAX_READ_BYTES = 1 << 20
NVML_LIBRARY = "libnvidia-ml.so.1"
NVML_NOT_FOUND = ("NVML Shared Library Not Found (libnvidia-ml.so.1 is in neither the loader cache "
                  "/etc/ld.so.cache, LD_LIBRARY_PATH nor the standard library directories)")
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64",
                "/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib")


if TYPE_CHECKING:
    from typing import NamedTuple

    class _ProbeFields(NamedTuple):
        argv: tuple[str, ...]
        returncode: int | None
        stdout: str
        stderr: str
        timed_out: bool = False
        error: str | None = None
else:  # the same fields, without importing typing at run time
    _ProbeFields = namedtuple("ProbeResult", "argv returncode stdout stderr timed_out error", defaults=(False, None))


class ProbeResult(_ProbeFields):
    """What one external program said (``argv``, ``returncode``, ``stdout``, ``stderr``,
    ``timed_out``, ``error``). ``error`` is set when it could not run or timed out."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0

    def why(self) -> str:
        """One line saying why the probe did not succeed."""
        if self.error:
            return self.error
        tail = (self.stderr.strip().splitlines() or [""])[-1][:200]
        return f"{self.argv[0]} exited with {self.returncode}" + (f": {tail}" if tail else "")


class FileStat(namedtuple("FileStat", "size mtime_ns")):
    """A file's size and modification time."""

    __slots__ = ()


class Source(ABC):
    """The raw answers a detector may ask for."""

    name: str = "source"

    @abstractmethod
    def run(self, probe_id: str, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeResult:
        """Run ``argv``; ``probe_id`` names the probe in a recording (``nvidia-smi-query-gpu``)."""

    @abstractmethod
    def read_text(self, path: str) -> str | None:
        """A file's text, or None when it does not exist or cannot be read."""

    @abstractmethod
    def env(self, name: str) -> str | None: ...

    @abstractmethod
    def which_all(self, name: str) -> list[str]:
        """Every executable ``name`` on PATH, in PATH order (absolute paths, not resolved)."""

    @abstractmethod
    def realpath(self, path: str) -> str: ...

    @abstractmethod
    def is_file(self, path: str) -> bool: ...

    @abstractmethod
    def is_dir(self, path: str) -> bool: ...

    @abstractmethod
    def listdir(self, path: str) -> list[str]: ...

    @abstractmethod
    def stat(self, path: str) -> FileStat | None: ...

    @abstractmethod
    def value(self, key: str, compute: Callable[[], Any]) -> Any:
        """An in-process value such as ``uname`` or ``python``: computed live, recorded in a fixture."""

    @abstractmethod
    def nvml(self) -> NvmlSession:
        """An initialised NVML session; raises :class:`cmx_detect.nvml.NvmlCallError`."""

    def which(self, name: str) -> str | None:
        found = self.which_all(name)
        return found[0] if found else None


class LiveSource(Source):
    """The machine cmx runs on."""

    name = "live"

    def run(self, probe_id: str, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeResult:
        return run_command(argv, timeout_s)

    def read_text(self, path: str) -> str | None:
        try:
            with open(path, "rb") as fh:
                return fh.read(MAX_READ_BYTES).decode("utf-8", "replace")
        except OSError:
            return None

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def which_all(self, name: str) -> list[str]:
        found: list[str] = []
        for directory in (self.env("PATH") or "").split(os.pathsep):
            if not directory:
                continue
            hit = _executable_in(directory, name)
            if hit and os.path.abspath(hit) not in found:
                found.append(os.path.abspath(hit))
        return found

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return FileStat(st.st_size, st.st_mtime_ns)

    def value(self, key: str, compute: Callable[[], Any]) -> Any:
        return compute()

    def nvml(self) -> NvmlSession:
        """NVML queried in a child interpreter with a timeout (see :data:`NVML_CHILD`), only
        when the loader can find ``libnvidia-ml.so.1`` (a file check, no child, otherwise)."""
        where = nvml_library()
        if where is None:
            from cmx_detect.nvml import NvmlCallError  # deferred: start-up: 12 modules not needed to start cmx

            raise NvmlCallError("NVMLError_LibraryNotFound", NVML_NOT_FOUND, 12)
        return nvml_in_subprocess(NVML_TIMEOUT_S)


def _executable_in(directory: str, name: str) -> str | None:
    """``directory/name`` if it is an executable file (what :func:`shutil.which` checks on
    POSIX for one directory, without importing shutil)."""
    path = os.path.join(directory, name)
    return path if os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path) else None


def run_command(argv: Sequence[str], timeout_s: float) -> ProbeResult:
    """Run ``argv`` with a timeout; never raises. The child gets its own session so that a
    timeout kills it and everything it started; output is decoded leniently."""
    # deferred: start-up: 13 modules not needed to start cmx
    import subprocess  # here, not at import: fingerprints import this module on every command

    args = tuple(str(a) for a in argv)
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
    except OSError as err:
        return ProbeResult(args, None, "", "", error=f"cannot run {args[0]}: {err.strerror or err}")
    try:
        out, err_out = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err_out = _drain(proc)
        return ProbeResult(args, None, _text(out), _text(err_out), timed_out=True,
                           error=f"{os.path.basename(args[0])} timed out after {timeout_s:g} s")
    return ProbeResult(args, proc.returncode, _text(out), _text(err_out))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    import subprocess  # deferred: start-up: 13 modules not needed to start cmx

    try:
        return proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:  # a grandchild in another group holds the pipe
        proc.kill()
        return b"", b""


def _text(data: bytes | None) -> str:
    return (data or b"")[:MAX_READ_BYTES].decode("utf-8", "replace")


def nvml_library(ld_cache: str = "/etc/ld.so.cache") -> str | None:
    """Where the dynamic loader would find ``libnvidia-ml.so.1``, checked as the loader looks:
    ``LD_LIBRARY_PATH``, the name in its cache file, the standard directories. None when none
    has it, so no child interpreter is started for an NVML that cannot load."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for directory in dirs:
        if os.path.exists(os.path.join(directory, NVML_LIBRARY)):
            return os.path.join(directory, NVML_LIBRARY)
    try:
        with open(ld_cache, "rb") as fh:
            if NVML_LIBRARY.encode() in fh.read(8 << 20):
                return ld_cache
    except OSError:
        pass
    return next((os.path.join(d, NVML_LIBRARY) for d in LIBRARY_DIRS
                 if os.path.exists(os.path.join(d, NVML_LIBRARY))), None)


def nvml_in_subprocess(timeout_s: float) -> NvmlSession:
    from cmx_detect.nvml import NvmlCallError, RecordedNvml  # deferred: start-up: 12 modules not needed to start cmx

    result = run_command([sys.executable, "-c", NVML_CHILD], timeout_s)
    line = next((x for x in result.stdout.splitlines() if x.startswith("CMX-NVML ")), None)
    if line is None:
        why = result.why() if not result.ok else "no CMX-NVML line in its output"
        raise NvmlCallError("ProbeFailed", f"NVML probe failed: {why}")
    try:
        calls = json.loads(line[len("CMX-NVML "):])["calls"]
    except (ValueError, KeyError, TypeError) as err:
        raise NvmlCallError("ProbeFailed", f"NVML probe output unreadable: {err}") from None
    return RecordedNvml(calls)


def python_value() -> dict[str, Any]:
    """The running interpreter, as recorded under ``values.python`` in fixtures."""
    import platform  # deferred: not needed by cmx --help or a replayed warm run

    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "is_virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
    }
