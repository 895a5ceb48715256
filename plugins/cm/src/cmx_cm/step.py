"""The ``cm.script`` step type: run one imported CM/MLC script in the cmx work directory.

The step builds the script's env from its typed inputs (each env key is an input), folds in
its deps' ``new_env``/``new_state`` the way CM merges a dep's result into its caller, and
hands everything to :mod:`cmx_cm.runner` in a child process with a minimal environment. What
comes back is filtered by ``new_env_keys`` and returned as typed outputs: ``new_env``,
``new_state``, ``version`` and one output per literal key (``CM_HOST_MEMORY_CAPACITY`` ->
``cm_host_memory_capacity``).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_cm._shim.cmind.utils import compare_versions
from cmx_cm.cache_check import plain, runner_env, script_stamp
from cmx_cm.index import input_name
from cmx_cm.meta import load_script
from cmx_core.api import StepContext, StepFailed, StepOutput, UsageError, run_step_process

PARAMS: dict[str, str] = {
    "script_dir": "the CM/MLC script directory (customize.py, run.sh, metadata)",
    "flavor": "cm or mlc (the env prefix CM_ or MLC_)",
    "script_digest": "sha256 of the script's files (feeds the cache key)",
    "env_inputs": "input name -> env key",
    "input_mapping": "input name -> env key (the script's input_mapping)",
    "new_env_keys": "the script's new_env_keys (globs)",
    "new_state_keys": "the script's new_state_keys (globs)",
    "variation_keys": "variation -> extra new_env_keys (state:KEY for state keys)",
    "deps": "dep aliases in CM's merge order",
    "clean_files": "files removed from the work directory before the script runs",
    "script_name": "the native script's name (run)",
    "version_env": "version -> the env its versions entry sets when that version is asked for",
    "variation_script_names": "variation -> the native script it runs instead (a variation's script_name)",
    "tags": "the script's CM tags (customize.py sees them)",
    "timeout_s": "wall-clock limit of the script in seconds",
    "hooks": "the run-time deps, in CM's lifecycle order (kind, tags, CM conditions, env, variation, version)",
    "local_env_keys": "the script's local_env_keys (not passed down to its run-time deps)",
    "variation_state": "variation -> the state it sets (a variation's state:)",
    "not_exact": "the metadata keys not carried exactly (key, kind, reason): said on stderr when the script runs",
    "forced_env": "variation ('' for the script) -> the env keys its env sets over a caller's cm_env, as CM does",
    "adr_marks": "variation -> the |NAME:ID| marks of its add_deps_recursive, handed down with cm_adr",
    "combinations": "the combination variations (parts, env, default_env, keys, script_name), applied when all "
                    "their parts are selected",
    "default_version": "the script's default_version: the version input's default, moved into the script's "
                       "version_min..version_max as CM moves it",
}


def _merge(target: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, list) and isinstance(target.get(key), list):
            target[key] = target[key] + [v for v in value if v not in target[key]]
        else:
            target[key] = value


def combinations(ctx: StepContext) -> list[Mapping[str, Any]]:
    """The combination variations (``a,b``) whose parts are all selected, in file order."""
    return [c for c in ctx.params.get("combinations") or [] if all(p in ctx.variations for p in c.get("parts") or [])]


def cm_env(text: Any) -> dict[str, Any]:
    """The ``cm_env`` input (a JSON object of env keys) as a dict; bad input is one line."""
    if text in (None, "", "{}"):
        return {}
    try:
        value = json.loads(str(text))
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        value = None
    if not isinstance(value, dict):
        raise UsageError(f"input cm_env must be a JSON object of env keys (--cm_env='{{\"KEY\": \"VALUE\"}}'), "
                         f"got {str(text)[:80]!r}")
    return {str(k): v if isinstance(v, list) else str(v) for k, v in value.items()}


def forced_keys(ctx: StepContext) -> set[str]:
    """The env keys a caller's ``cm_env`` cannot change, as in CM: those the script's own
    ``env``, its selected variations' and its combinations' ``env`` set."""
    forced = dict(ctx.params.get("forced_env") or {})
    keys = {str(k) for name in ("", *ctx.variations) for k in forced.get(name) or ()}
    return keys | {str(k) for combo in combinations(ctx) for k in dict(combo.get("env") or {})}


def script_env(ctx: StepContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """The env and state a script starts with: its inputs, then its deps' results on top."""
    env: dict[str, Any] = {}
    for source in ("env_inputs", "input_mapping"):
        for name, key in dict(ctx.params.get(source) or {}).items():
            value = ctx.inputs.get(name)
            if value is not None:
                env[str(key)] = str(value)
    env.update(dict(ctx.params.get("version_env") or {}).get(str(ctx.inputs.get("version") or ""), {}))
    for combo in combinations(ctx):
        env.update(dict(combo.get("env") or {}))
        for key, value in dict(combo.get("default_env") or {}).items():
            env.setdefault(str(key), value)
    forced = forced_keys(ctx)
    env.update({key: value for key, value in cm_env(ctx.inputs.get("cm_env")).items() if key not in forced})
    _clamp_default_version(env, env_prefix(ctx), str(ctx.params.get("default_version") or ""))
    state: dict[str, Any] = {}
    for variation, values in dict(ctx.params.get("variation_state") or {}).items():
        if variation in ctx.variations:
            _merge(state, plain(values))
    for combo in combinations(ctx):
        _merge(state, plain(combo.get("state") or {}))
    for alias in ctx.params.get("deps") or []:
        if alias in ctx.deps:
            outputs = plain(ctx.deps[alias])
            _merge(env, outputs.get("new_env") or {})
            _merge(state, outputs.get("new_state") or {})
    return env, state


def env_prefix(ctx: StepContext) -> str:
    """The prefix of the script's env keys: ``CM`` or ``MLC``."""
    return "CM" if ctx.params.get("flavor", "cm") == "cm" else "MLC"


def _clamp_default_version(env: dict[str, Any], prefix: str, default: str) -> None:
    """CM's rule for a version not asked for: the default version, raised to ``VERSION_MIN``
    or lowered to ``VERSION_MAX_USABLE`` (else ``VERSION_MAX``), constraints a caller may hand
    down (``reuse_version``). A version asked for that equals the default is moved too: the
    input cannot tell the two apart."""
    if not default or str(env.get(f"{prefix}_VERSION") or "") != default:
        return
    version, low, high = default, str(env.get(f"{prefix}_VERSION_MIN") or ""), str(env.get(f"{prefix}_VERSION_MAX")
                                                                                    or "")
    if low and compare_versions(version, low) < 0:
        version = low
    if high and compare_versions(version, high) > 0:
        version = str(env.get(f"{prefix}_VERSION_MAX_USABLE") or "") or high
    env[f"{prefix}_VERSION"] = version


def _keys(ctx: StepContext) -> tuple[list[str], list[str]]:
    env_keys = [str(k) for k in ctx.params.get("new_env_keys") or []]
    state_keys = [str(k) for k in ctx.params.get("new_state_keys") or []]
    extras = [extra for variation, extra in dict(ctx.params.get("variation_keys") or {}).items()
              if variation in ctx.variations] + [c.get("keys") or [] for c in combinations(ctx)]
    for extra in extras:
        for key in extra:
            (state_keys if str(key).startswith("state:") else env_keys).append(str(key).removeprefix("state:"))
    return env_keys, state_keys


def _script_name(ctx: StepContext) -> str:
    """The script's ``script_name``, or that of the last selected variation that sets one."""
    chosen = str(ctx.params.get("script_name", "run"))
    for variation, name in dict(ctx.params.get("variation_script_names") or {}).items():
        if variation in ctx.variations:
            chosen = str(name)
    for combo in combinations(ctx):
        chosen = str(combo.get("script_name") or chosen)
    return chosen


def request(ctx: StepContext) -> dict[str, Any]:
    """The runner's request (written to ``cm-request.json`` in the work directory)."""
    directory = Path(str(ctx.params["script_dir"]))
    if not directory.is_dir():
        raise StepFailed(f"{ctx.recipe}: script directory {directory} is gone; import the collection again")

    env, state = script_env(ctx)
    env_keys, state_keys = _keys(ctx)
    timeout = ctx.params.get("timeout_s") or ctx.timeout_s
    return {"script_dir": str(directory), "work_dir": str(ctx.work_dir),
            "prefix": env_prefix(ctx),
            "env": env, "state": state, "meta": plain(load_script(directory).data),
            "new_env_keys": env_keys, "new_state_keys": state_keys,
            "clean_files": list(ctx.params.get("clean_files") or []),
            "script_name": _script_name(ctx),
            "tags": list(ctx.params.get("tags") or []), "variations": [str(v) for v in ctx.variations],
            "timeout_s": float(timeout) if timeout else None,
            "hooks": plain(list(ctx.params.get("hooks") or [])),
            "local_env_keys": list(ctx.params.get("local_env_keys") or []),
            "recipe_dir": str(ctx.recipe_dir) if ctx.recipe_dir else None,
            "version_wanted": str(ctx.inputs.get("version") or ""), "adr": handed_down_adr(ctx)}


def handed_down_adr(ctx: StepContext) -> str:
    """CM's ``add_deps_recursive`` this script hands its run-time deps: its callers', then that
    of its selected variations (``|NAME:ID|`` marks)."""
    marks = dict(ctx.params.get("adr_marks") or {})
    return str(ctx.inputs.get("cm_adr") or "") + "".join(str(marks[v]) for v in ctx.variations if v in marks)


def say_not_exact(ctx: StepContext) -> None:
    """One line on stderr naming the keys of this script that the bridge does not carry exactly."""
    issues = list(ctx.params.get("not_exact") or [])
    if not issues:
        return
    kinds = [str(i.get("kind")) for i in issues]
    keys = ", ".join(str(i.get("key")) for i in issues[:6]) + (" ..." if len(issues) > 6 else "")
    print(f"cmx-cm: {ctx.recipe}: {len(issues)} metadata keys not carried exactly ({kinds.count('approximated')} "
          f"approximated, {kinds.count('unmapped')} left out: {keys}); the result's not_exact output lists them",
          file=sys.stderr)


def show_output(ctx: StepContext, log: Path) -> None:
    """With ``cmx run -v``, the script's own output (its step log) on stderr, line by line."""
    if not ctx.log.isEnabledFor(logging.DEBUG) or not log.is_file():
        return
    for line in log.read_text(errors="replace").splitlines():
        ctx.log.debug(f"{ctx.recipe} | {line}")


def run_script(ctx: StepContext) -> StepOutput:
    """Run the script; a failure is one line naming the script and the log."""
    req = request(ctx)
    say_not_exact(ctx)
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    req_path, res_path = ctx.work_dir / "cm-request.json", ctx.work_dir / "cm-result.json"
    req_path.write_text(json.dumps(req, indent=2, sort_keys=True))
    res_path.unlink(missing_ok=True)
    log = ctx.log_dir / "cm-script.log"
    limit = req["timeout_s"]
    started = time.monotonic()
    try:
        ended = run_step_process([sys.executable, "-I", "-m", "cmx_cm.runner", str(req_path), str(res_path)],
                                 ctx.work_dir, runner_env(), limit, log)
    except StepFailed:
        if limit is None or time.monotonic() - started < limit:
            raise
        raise StepFailed(f"{ctx.recipe}: the script ran past its time limit of {limit:g} s and was stopped with "
                         f"every process it started; see {log}") from None
    finally:
        show_output(ctx, log)
    if not res_path.is_file():
        raise StepFailed(f"{ctx.recipe}: the script runner {_how_it_ended(ended.returncode)} without a result; "
                         f"see {log}", ended=ended.ended())
    result = json.loads(res_path.read_text())
    if not result.get("ok"):
        raise StepFailed(f"{ctx.recipe}: {result.get('error')}; see {log}")
    return StepOutput(outputs=outputs_of(ctx, result))


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:  # killed: by an --inject fault, the OOM killer, a kill from outside
        try:
            name = f" ({signal.Signals(-returncode).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-returncode}{name}"
    return f"exited with code {returncode} (the script called exit?)"


def outputs_of(ctx: StepContext, result: Mapping[str, Any]) -> dict[str, Any]:
    new_env = dict(result.get("new_env") or {})
    out: dict[str, Any] = {"new_env": new_env, "new_state": dict(result.get("new_state") or {}),
                           "version": result.get("version"), "lifecycle": list(result.get("lifecycle") or []),
                           "not_exact": plain(list(ctx.params.get("not_exact") or [])),
                           "script": {"dir": str(ctx.params["script_dir"]),
                                      "stamp": script_stamp(Path(str(ctx.params["script_dir"]))),
                                      "prefix": env_prefix(ctx),
                                      "timeout_s": ctx.params.get("timeout_s") or ctx.timeout_s}}
    if result.get("dependent_path"):
        out["script"]["dependent_path"] = str(result["dependent_path"])
    if result.get("validate_cache"):
        out["script"]["validate_cache"] = dict(result["validate_cache"])
    for key, value in new_env.items():
        name = input_name(key)
        if name and name not in out:
            out[name] = value
    return out
