"""Running a script's ``run.sh`` the way CM does: the env exported (``+KEY`` lists prepended to
the variable), the script sourced by bash in the work directory, then ``tmp-run-env.out``
(``KEY=VALUE`` lines) and ``tmp-run-state.json`` merged back. An argument list, never a
shell string built from values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, NamedTuple

from cmx_cm._shim.cmind.utils import convert_env_to_dict, merge_dicts

TMP_ENV = "tmp-run-env.out"
TMP_STATE = "tmp-run-state.json"
TMP_STATE_IN = "tmp-state.json"


class ScriptError(Exception):
    """A native script or a customize.py function failed; the message is one line."""


def script_name(env: Mapping[str, Any], directory: Path, name: str = "run") -> str:
    """CM's choice of run script: ``run-<flavor>-<version>-<platform>.sh`` down to ``run.sh``."""
    prefix = next((k.split("_HOST_OS_FLAVOR")[0] for k in env if k.endswith("_HOST_OS_FLAVOR")), "CM")
    flavor = str(env.get(f"{prefix}_HOST_OS_FLAVOR", ""))
    version = str(env.get(f"{prefix}_HOST_OS_VERSION", ""))
    platform = str(env.get(f"{prefix}_HOST_PLATFORM_FLAVOR", ""))
    for parts in ((flavor, version, platform), (flavor, platform), (flavor, version), (flavor,), (platform,)):
        if all(parts):
            candidate = "-".join((name, *parts)) + ".sh"
            if (directory / candidate).is_file():
                return candidate
    return name + ".sh"


def process_env(env: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: ``base`` plus every script env key, ``+KEY`` lists prepended."""
    out = dict(base)
    for key in sorted(env):
        value = env[key]
        if key.startswith("+"):
            name = key[1:]
            items = [str(v) for v in value] if isinstance(value, list) else [str(value)]
            out[name] = os.pathsep.join([*items, base.get(name, "")])
        else:
            out[key] = str(value)
    return out


def merge_outputs(work_dir: Path, env: MutableMapping[str, Any], state: MutableMapping[str, Any]) -> None:
    """Fold the files a native script wrote into env and state (lists appended, unique)."""
    state_file = work_dir / TMP_STATE
    if state_file.is_file():
        try:
            merge_dicts({"dict1": state, "dict2": json.loads(state_file.read_text()),
                         "append_lists": True, "append_unique": True})
        except ValueError as exc:
            raise ScriptError(f"{state_file}: not JSON ({exc})") from None
    env_file = work_dir / TMP_ENV
    if env_file.is_file():
        merge_dicts({"dict1": env, "dict2": convert_env_to_dict(env_file.read_text())["dict"],
                     "append_lists": True, "append_unique": True})


class ScriptPlace(NamedTuple):
    """Where a script's native scripts run: the script's ``directory``, the ``work_dir`` they run
    in, the environment ``base_env`` they extend, and how long one may run (None: no limit)."""

    directory: Path
    work_dir: Path
    base_env: Mapping[str, str]
    timeout_s: float | None = None


def run_native(place: ScriptPlace, name: str, env: MutableMapping[str, Any], state: MutableMapping[str, Any]) -> bool:
    """Run ``name`` (``run``, ``install``...) if the script has it; False when it has none."""
    directory, work_dir, timeout_s = place.directory, place.work_dir, place.timeout_s
    script = directory / script_name(env, directory, name)
    if not script.is_file():
        return False
    for stale in (TMP_ENV, TMP_STATE):
        (work_dir / stale).unlink(missing_ok=True)
    (work_dir / TMP_STATE_IN).write_text(json.dumps(state, indent=2, sort_keys=True))
    argv = ["bash", "-c", '. "$1"', "cmx-cm", str(script)]
    sys.stdout.flush()  # what customize.py printed without a newline comes before the script's output
    sys.stderr.flush()
    with subprocess.Popen(argv, cwd=work_dir, env=process_env(env, place.base_env), stdin=subprocess.DEVNULL) as proc:
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            raise ScriptError(f"{script} ran past {timeout_s:g} s and was stopped with what it started") from None
    if code != 0:
        raise ScriptError(f"{script} failed with exit code {code} (its output is in the step log)")
    merge_outputs(work_dir, env, state)
    return True


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it now (a script's ``sleep &`` as well as its
    shell); what is already gone is skipped."""
    import psutil  # deferred: only a script past its time limit needs it

    try:
        top = psutil.Process(pid)
        victims = [top, *top.children(recursive=True)]
    except psutil.Error:
        return
    for victim in victims:
        try:
            victim.kill()
        except psutil.Error:
            pass
