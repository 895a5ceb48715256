"""cmx-core's own plugin: the ``shell``, ``python`` and ``cmx.facts`` step types, minimal
``os``/``cpu``/``memory``/``python`` detectors, the ``local`` executor, and the launchers
``torchrun``, ``mpirun``, ``env`` and ``none`` (:mod:`cmx_core.builtin.launchers`).

It is registered through the same hooks as any plugin, under the name ``cmx-core``.
Plugin detectors of the same names (cmx-detect) replace these.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cmx_core.builtin.launchers import LAUNCHERS
from cmx_core.builtin.python_check import check_python_step as check
from cmx_core.errors import StepFailed, UsageError
from cmx_core.facts.system import detect_container, detect_cpu, detect_host, detect_memory, detect_os, detect_python
from cmx_core.faults.armed import current as injected
from cmx_core.plugins.events import registry_events
from cmx_core.plugins.hookspecs import hookimpl
from cmx_core.plugins.registry import ExecutionRequest, Executor
from cmx_core.providers.types import Detector, ExecutionOutcome, Launcher, StepContext, StepType
from cmx_core.providers.values import Metric, ResultPart, StepOutput
from cmx_core.run import checkpoints
from cmx_core.run.execute import run_local
from cmx_core.run.processes import run_step_process

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
    if ctx.metrics.metrics_file is not None:  # the application metrics channel (docs/telemetry.md)
        env.setdefault("CMX_METRICS_FILE", str(ctx.metrics.metrics_file))
    armed = injected()
    if armed is not None and armed.progress_file is not None:  # kill-step@50% reads the step's progress
        env.setdefault("CMX_METRICS_FILE", str(armed.progress_file))
    if ctx.checkpoint_dir is not None:  # docs/faults.md
        env[checkpoints.ENV] = str(ctx.checkpoint_dir)
    env[checkpoints.ATTEMPT_ENV] = str(ctx.attempt)
    timeout = ctx.params.get("timeout_s") or ctx.timeout_s
    stdout_path, stderr_path = ctx.log_dir / "stdout.txt", ctx.log_dir / "stderr.txt"
    ended = run_step_process(argv, ctx.work_dir, env, timeout, stdout_path, stderr_path)
    returncode = ended.returncode
    if returncode != 0:
        tail = _tail(stderr_path)
        raise StepFailed(f"`{argv[0]}` exited with code {returncode}{': ' + tail if tail else ''} (log: {stderr_path})",
                         ended=ended.ended())
    outputs: dict[str, Any] = {"returncode": returncode, "stdout_path": str(stdout_path)}
    outputs.update(_parse_stdout(stdout_path, ctx.params.get("parse", "none")))
    declared = ctx.params.get("metrics")
    result = _stdout_metrics(stdout_path, declared, ctx.measures) if declared else None
    return StepOutput(outputs=outputs, result=result)


def _step_env(extra: Mapping[str, Any], allow: Any) -> dict[str, str]:
    names = set(BASE_ENV) | {str(n) for n in allow}
    env = {k: v for k, v in os.environ.items() if k in names}
    env.update({str(k): str(v) for k, v in extra.items()})
    return env


def _tail(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def _parse_stdout(path: Path, mode: str) -> dict[str, Any]:
    if mode == "none":
        return {}

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


def _stdout_metrics(path: Path, declared: Mapping[str, Mapping[str, Any]], measures: bool = False) -> ResultPart:
    """The ``metrics:`` a shell step declares, read from its stdout: each by a ``regex`` (its
    first group, or the whole match), a ``json`` key (the last JSON-object line holding it) or
    a ``kv`` key (the last ``KEY=VALUE`` line). The first declared metric is the primary one.
    A metric that stdout does not give fails the step: no value is invented. A measuring step
    (``measures: true``) that gave every metric is ``valid``; any other is ``completed``."""
    text = path.read_text(errors="replace")
    metrics = {name: Metric(_metric_value(name, spec, text, path), str(spec["unit"]),
                            bool(spec.get("higher_is_better", False)))
               for name, spec in declared.items()}
    return ResultPart(status="valid" if measures else "completed", benchmark={"primary_metric": next(iter(declared))},
                      metrics=metrics)


def _metric_value(name: str, spec: Mapping[str, Any], text: str, path: Path) -> float:
    sources = [k for k in ("regex", "json", "kv") if k in spec]
    if len(sources) != 1 or not name.isidentifier():
        raise UsageError(f"shell step metrics.{name}: give exactly one of regex, json or kv "
                         f"(got {', '.join(sources) or 'none'}), under a name of letters, digits and _")
    raw = _metric_text(spec, text)
    if raw is None:
        how = next(f"{k} {spec[k]!r}" for k in ("regex", "json", "kv") if k in spec)
        raise StepFailed(f"metric {name}: stdout has no value for {how} (log: {path})")
    try:
        return float(str(raw).replace(",", "").replace("_", ""))
    except ValueError:
        raise StepFailed(f"metric {name}: {raw!r} from stdout is not a number (log: {path})") from None


def _metric_text(spec: Mapping[str, Any], text: str) -> Any:
    if "regex" in spec:
        try:
            found = re.search(str(spec["regex"]), text, re.MULTILINE)
        except re.error as exc:
            raise UsageError(f"metrics: regex {spec['regex']!r} is not a valid regular expression ({exc})") from None
        return None if found is None else (found.group(1) if found.groups() else found.group(0))
    lines = reversed(text.splitlines())
    if "json" in spec:
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and spec["json"] in value:
                return value[spec["json"]]
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == spec["kv"]:
            return value.strip()
    return None


def check_python_step(params: Mapping[str, Any], recipe_dir: Path) -> tuple[str, str] | None:
    """The plan-time check of a ``python`` step (:mod:`cmx_core.builtin.python_check`, loaded
    only for a recipe that has one)."""
    return check(params, recipe_dir)


def python_step(ctx: StepContext) -> StepOutput | Mapping[str, Any]:
    """Call ``module:function`` with the step context."""
    target = ctx.params.get("function")
    if not isinstance(target, str) or ":" not in target:
        raise UsageError(f"{ctx.recipe}: python step needs 'function: package.module:function' (got {target!r})")

    module_name, _, attr = target.partition(":")
    try:
        with _CWD_LOCK:
            module = _import_step_module(module_name, ctx.recipe_dir)
        function: Callable[[StepContext], Any] = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"{ctx.recipe}: cannot import {target}: {exc}") from None
    with _in_directory(ctx.work_dir):
        result = function(ctx)
    return result if isinstance(result, (StepOutput, Mapping)) else {"value": result}


_CWD_LOCK = threading.Lock()


def _import_step_module(module_name: str, recipe_dir: Path | None) -> Any:
    """Import a step's module, preferring one kept next to the recipe file (``bench.py`` or a
    ``bench/`` package beside ``recipe.yaml``), the way Python puts a script's directory first
    on ``sys.path``. A same-named module loaded earlier from somewhere else (another recipe's
    directory) is dropped first, so two recipes each with their own ``bench.py`` get their own.
    The caller holds ``_CWD_LOCK``: ``sys.path`` and ``sys.modules`` are process-wide."""
    top = module_name.partition(".")[0]
    local = recipe_dir is not None and ((recipe_dir / f"{top}.py").is_file()
                                        or (recipe_dir / top / "__init__.py").is_file())
    if not local or recipe_dir is None:
        return importlib.import_module(module_name)
    where = str(recipe_dir.resolve())
    loaded = sys.modules.get(top)
    if loaded is not None and _RECIPE_MODULES.get(top) != where:
        if top not in _RECIPE_MODULES:
            raise UsageError(f"{recipe_dir / top}: a module next to the recipe is named like the already imported "
                             f"module '{top}' ({getattr(loaded, '__file__', 'built in')}); rename it")
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]
    sys.path.insert(0, where)
    try:
        importlib.invalidate_caches()
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(where)
    _RECIPE_MODULES[top] = where
    return module


_RECIPE_MODULES: dict[str, str] = {}
"""Top-level module names imported from a recipe directory, and that directory."""


@contextmanager
def _in_directory(directory: Path) -> Iterator[None]:
    """Run in the step's work directory, as a shell step does, so a function's relative
    writes land there and not in the user's current directory. The working directory is
    the process's: python steps of a ``-j N`` run take turns (other step types do not)."""
    with _CWD_LOCK:
        previous = os.getcwd()
        directory.mkdir(parents=True, exist_ok=True)
        os.chdir(directory)
        try:
            yield
        finally:
            os.chdir(previous)


def facts_step(ctx: StepContext) -> StepOutput:
    """Return the named facts as outputs (``with: {names: [os, cpu]}``)."""
    names = ctx.params.get("names") or []
    if isinstance(names, str):
        names = [names]
    return StepOutput(outputs={str(name): ctx.facts[str(name)] for name in names})


# -- hooks --------------------------------------------------------------------------------


SHELL_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["cmd"],
    "additionalProperties": False,
    "properties": {
        "cmd": {"type": "array", "minItems": 1, "items": {"type": ["string", "number"]},
                "description": "the command as an argument list, never a shell string"},
        "env": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        "env_allow": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "parse": {"enum": ["none", "kv", "json"]},
        "metrics": {
            "type": "object",
            "description": "metrics read from stdout: NAME: {regex|json|kv: ..., unit: ..., higher_is_better: ...}",
            "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["unit"],
                "properties": {
                    "regex": {"type": "string", "minLength": 1, "description": "its first group is the value"},
                    "json": {"type": "string", "minLength": 1, "description": "a key of a JSON-object line"},
                    "kv": {"type": "string", "minLength": 1, "description": "the KEY of a KEY=VALUE line"},
                    "unit": {"type": "string", "minLength": 1},
                    "higher_is_better": {"type": "boolean"},
                },
            },
        },
    },
}
PYTHON_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["function"],
    "properties": {"function": {"type": "string", "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                                "description": "package.module:function"}},
}
FACTS_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"names": {"type": ["array", "string"], "items": {"type": "string"}}},
}


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(
        name="shell", summary="Run a command given as an argument list", run=shell_step,
        params={"cmd": "argument list", "env": "extra environment variables",
                "env_allow": "host variables to pass through", "timeout_s": "seconds",
                "parse": "none | kv | json: how stdout becomes outputs",
                "metrics": "NAME: {regex|json|kv, unit, higher_is_better}: metrics read from stdout"},
        params_schema=SHELL_PARAMS_SCHEMA,
    ))
    register(StepType(name="python", summary="Call module:function(ctx)", run=python_step,
                      check_plan=check_python_step,
                      params_schema=PYTHON_PARAMS_SCHEMA))
    register(StepType(name="cmx.facts", summary="Return detected facts as outputs", run=facts_step,
                      params={"names": "fact names"}, params_schema=FACTS_PARAMS_SCHEMA))


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
    register(Executor(name="local", summary="Run on this machine (in-process, -j N threads)", run=_run_local,
                      runs_here=True))


@hookimpl
def cmx_register_launchers(register: Callable[[Launcher], None]) -> None:
    for launcher in LAUNCHERS:
        register(launcher)


def _run_local(request: ExecutionRequest) -> ExecutionOutcome:
    return run_local(request, registry_events(request.context.registry))
