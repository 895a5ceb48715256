"""cmx-core's own plugin: the ``shell``, ``python`` and ``cmx.facts`` step types, minimal
``os``/``cpu``/``memory``/``python`` detectors, and the ``local`` executor.

It is registered through the same hooks as any plugin, under the name ``cmx-core``.
Plugin detectors of the same names (cmx-detect) replace these.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.errors import StepFailed, UsageError
from cmx_core.hookspecs import hookimpl
from cmx_core.providers import Detector, Executor, StepContext, StepOutput, StepType

if TYPE_CHECKING:
    import subprocess

BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


# -- steps --------------------------------------------------------------------------------


def shell_step(ctx: StepContext) -> StepOutput:
    """Run an argument list (never a shell string) with an allow-listed environment."""
    cmd = ctx.params.get("cmd")
    if isinstance(cmd, str) or not isinstance(cmd, (list, tuple)) or not cmd:
        raise UsageError(f"{ctx.recipe}: shell step needs 'cmd' as a list of arguments, not a string (got {cmd!r})")
    for i, arg in enumerate(cmd):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise UsageError(f"{ctx.recipe}: shell step cmd[{i}] is {type(arg).__name__} {arg!r}; quote it as a string")
    argv = [str(a) for a in cmd]
    env = _step_env(ctx.params.get("env") or {}, ctx.params.get("env_allow") or ())
    timeout = ctx.params.get("timeout_s") or ctx.timeout_s
    stdout_path, stderr_path = ctx.log_dir / "stdout.txt", ctx.log_dir / "stderr.txt"
    returncode = _run_process(argv, ctx.work_dir, env, timeout, stdout_path, stderr_path)
    if returncode != 0:
        tail = _tail(stderr_path)
        raise StepFailed(f"`{argv[0]}` exited with code {returncode}{': ' + tail if tail else ''} (log: {stderr_path})")
    outputs: dict[str, Any] = {"returncode": returncode, "stdout_path": str(stdout_path)}
    outputs.update(_parse_stdout(stdout_path, ctx.params.get("parse", "none")))
    return StepOutput(outputs=outputs)


def _step_env(extra: Mapping[str, Any], allow: Any) -> dict[str, str]:
    names = set(BASE_ENV) | {str(n) for n in allow}
    env = {k: v for k, v in os.environ.items() if k in names}
    env.update({str(k): str(v) for k, v in extra.items()})
    return env


def _run_process(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
                 stdout_path: Path, stderr_path: Path) -> int:
    import subprocess

    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise StepFailed(f"cannot start `{argv[0]}`: {exc.strerror}") from None
        RUNNING.add(proc)
        try:
            return proc.wait(timeout=float(timeout) if timeout else None)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise StepFailed(f"`{argv[0]}` timed out after {float(timeout):g} s and was killed (log: {stderr_path})") from None
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            RUNNING.discard(proc)


RUNNING: set[subprocess.Popen[bytes]] = set()  # noqa: F821 - annotation only
"""Processes started by shell steps; killed when a run is interrupted."""


def kill_running() -> None:
    """Kill every process group a shell step started (used on Ctrl-C)."""
    for proc in list(RUNNING):
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _tail(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def _parse_stdout(path: Path, mode: str) -> dict[str, Any]:
    if mode == "none":
        return {}
    import json

    text = path.read_text(errors="replace")
    if mode == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StepFailed(f"stdout is not JSON ({exc.msg} at line {exc.lineno}) (log: {path})") from None
        if not isinstance(value, dict):
            raise StepFailed(f"stdout JSON must be an object of outputs (log: {path})")
        return value
    if mode == "kv":
        pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
        return {k.strip(): v.strip() for k, v in pairs if k.strip().isidentifier()}
    raise UsageError(f"shell step: parse must be none, kv or json, not {mode!r}")


def python_step(ctx: StepContext) -> StepOutput | Mapping[str, Any]:
    """Call ``module:function`` with the step context."""
    target = ctx.params.get("function")
    if not isinstance(target, str) or ":" not in target:
        raise UsageError(f"{ctx.recipe}: python step needs 'function: package.module:function' (got {target!r})")
    import importlib

    module_name, _, attr = target.partition(":")
    try:
        function: Callable[[StepContext], Any] = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"{ctx.recipe}: cannot import {target}: {exc}") from None
    result = function(ctx)
    return result if isinstance(result, (StepOutput, Mapping)) else {"value": result}


def facts_step(ctx: StepContext) -> StepOutput:
    """Return the named facts as outputs (``with: {names: [os, cpu]}``)."""
    names = ctx.params.get("names") or []
    if isinstance(names, str):
        names = [names]
    return StepOutput(outputs={str(name): ctx.facts[str(name)] for name in names})


# -- detectors ----------------------------------------------------------------------------


def detect_os() -> dict[str, Any]:
    import platform

    info = _os_release()
    libc_name, libc_version = platform.libc_ver()
    return {
        "name": platform.system().lower(),
        "distro": info.get("NAME", ""),
        "version": info.get("VERSION_ID", ""),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "libc": f"{libc_name} {libc_version}".strip(),
    }


def _os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k: v.strip().strip('"') for k, v in pairs}


def detect_cpu() -> dict[str, Any]:
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return {
        "vendor": fields.get("vendor_id", ""),
        "model": fields.get("model name", os.uname().machine),
        "sockets": None,
        "cores": None,
        "threads": os.cpu_count(),
        "frequency_mhz": float(fields["cpu MHz"]) if "cpu MHz" in fields else None,
        "flags": sorted(set(fields.get("flags", "").split())),
    }


def detect_memory() -> dict[str, Any]:
    values: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"total_bytes": values.get("MemTotal"), "available_bytes": values.get("MemAvailable")}


def detect_python() -> dict[str, Any]:
    import platform

    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


def detect_host() -> dict[str, Any]:
    """Host name and system kind; ``CMX_SYSTEM_TYPE`` (datacenter, edge, workstation, ci)
    and ``CMX_NUMBER_OF_NODES`` say what cannot be probed."""
    nodes = os.environ.get("CMX_NUMBER_OF_NODES", "1")
    return {
        "name": os.uname().nodename,
        "type": os.environ.get("CMX_SYSTEM_TYPE") or None,
        "number_of_nodes": int(nodes) if nodes.isdigit() else 1,
    }


def detect_container() -> dict[str, Any] | None:
    """The container this process runs in, as a container executor declared it through
    ``CMX_CONTAINER_IMAGE``, ``CMX_CONTAINER_DIGEST`` and ``CMX_CONTAINER_RUNTIME``; None
    when not in a cmx-started container."""
    image = os.environ.get("CMX_CONTAINER_IMAGE")
    if not image:
        return None
    return {"image": image, "digest": os.environ.get("CMX_CONTAINER_DIGEST") or None,
            "runtime": os.environ.get("CMX_CONTAINER_RUNTIME") or None}


# -- hooks --------------------------------------------------------------------------------


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(
        name="shell", summary="Run a command given as an argument list", run=shell_step,
        params={"cmd": "argument list", "env": "extra environment variables",
                "env_allow": "host variables to pass through", "timeout_s": "seconds",
                "parse": "none | kv | json: how stdout becomes outputs"},
    ))
    register(StepType(name="python", summary="Call module:function(ctx)", run=python_step))
    register(StepType(name="cmx.facts", summary="Return detected facts as outputs", run=facts_step,
                      params={"names": "fact names"}))


@hookimpl
def cmx_register_detectors(register: Callable[[Detector], None]) -> None:
    register(Detector(name="os", summary="Operating system (platform, /etc/os-release)", detect=detect_os))
    register(Detector(name="cpu", summary="CPU model and thread count (/proc/cpuinfo)", detect=detect_cpu))
    register(Detector(name="memory", summary="Memory size (/proc/meminfo)", detect=detect_memory))
    register(Detector(name="python", summary="The running Python interpreter", detect=detect_python))
    register(Detector(name="host", summary="Host name and system type", detect=detect_host))
    register(Detector(name="container", summary="The cmx-started container this runs in", detect=detect_container))


@hookimpl
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    register(Executor(name="local", summary="Run on this machine (in-process, -j N threads)", run=_run_local))


def _run_local(request: Any) -> Path:
    from cmx_core.execute import run_local

    return run_local(request)
