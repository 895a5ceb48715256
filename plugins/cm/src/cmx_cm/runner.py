"""The child process that runs one CM/MLC script: ``python -I -m cmx_cm.runner REQUEST RESULT``.

A child, so a ``customize.py`` (which may ``sys.exit``, patch modules or print) cannot
touch the cmx process. It runs in the cmx work directory with the ``cmind``/``mlc`` shim
first on ``sys.path``, and follows CM's lifecycle: preprocess, ``run.sh``, postprocess,
then the version constraints and the ``new_env_keys``/``new_state_keys`` filter. It never
prompts: stdin is closed and ``input()``/``getpass()`` fail with a message naming the prompt.
Its output is line-buffered, so what customize.py prints keeps its place beside run.sh's in the
log (and under ``-v``), as in CM. The result (or the one-line error) is written as JSON to RESULT.
"""

from __future__ import annotations

import builtins
import copy
import functools
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cmx_cm import call_context
from cmx_cm.native import ScriptPlace, run_native

if TYPE_CHECKING:
    from types import ModuleType

    from cmx_cm.automation import Automation

SHIM = Path(__file__).parent / "_shim"


class Prompted(Exception):
    """A script asked for interactive input."""


def _no_prompt(prompt: object = "", *args: object, **kwargs: object) -> NoReturn:
    text = " ".join(str(prompt).split())[:120]
    raise Prompted(f"the script asked for interactive input ({text!r}); cmx never prompts: set the value "
                   "through the recipe's inputs (the env key or input_mapping name)")


def os_info() -> dict[str, Any]:
    """CM's ``os_info`` for a Linux/macOS host (the fields scripts read)."""
    import platform  # deferred: only a customize.py needs os_info
    import struct  # deferred: as platform

    name = "darwin" if platform.system().lower().startswith("darwin") else "linux"
    bits = str(8 * struct.calcsize("P"))
    try:  # waited for, with no shell: os.popen's child was left unreaped, a zombie that outlived cmx
        done = subprocess.run(["getconf", "LONG_BIT"], capture_output=True, text=True, timeout=30, check=False)
        bits = done.stdout.strip() or bits
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"platform": name, "bat_ext": ".sh", "set_env": 'export ${key}="${value}"', "env_separator": ":",
            "env_var": "${env_var}", "bits": bits, "python_bits": str(8 * struct.calcsize("P")),
            "start_script": ["#!/bin/bash", ""], "run_bat": ". ${bat_file}", "env": {}}


def substitute(env: dict[str, Any]) -> None:
    """CM's ``<<<KEY>>>`` placeholders in env values, filled from the env itself."""
    for key, value in list(env.items()):
        if isinstance(value, str) and "<<<" in value:
            env[key] = re.sub(r"<<<(.*?)>>>", lambda m: str(env.get(m.group(1), "")), value)


def load_customize(directory: Path) -> ModuleType | None:
    path = directory / "customize.py"
    if not path.is_file():
        return None
    import getpass  # deferred: only a script with a customize.py
    import importlib.util  # deferred: as getpass

    getpass.getpass = _no_prompt  # customize.py's prompts fail with a message (run.sh's have no stdin)
    spec = importlib.util.spec_from_file_location("customize", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def select(source: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """CM's ``new_env_keys`` filter: globs, exact keys, and ``<<<KEY>>>`` indirections."""
    import fnmatch  # deferred: only a glob in new_env_keys

    out: dict[str, Any] = {}
    for pattern in patterns:
        if "*" in pattern or "?" in pattern:
            out.update({k: v for k, v in source.items() if fnmatch.fnmatchcase(k, pattern)})
        elif pattern in source:
            out[pattern] = source[pattern]
        elif "<<<" in pattern:
            for ref in re.findall(r"<<<(.*?)>>>", pattern):
                target = source.get(ref)
                if isinstance(target, str) and target in source:
                    out[target] = source[target]
    return out


def _check(result: Any, stage: str) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise RuntimeError(f"{stage} returned {type(result).__name__}, not CM's result dict")
    if result.get("return", 0) > 0:
        raise RuntimeError(f"{stage} failed: {' '.join(str(result.get('error', 'no error message')).split())}")
    return result


def start(request: Mapping[str, Any]) -> tuple[Path, Path, str, dict[str, Any], dict[str, Any]]:
    """The script's directory, work directory, env prefix, and the env and state it starts
    with: the request's, with CM's ``*_TMP_CURRENT_*`` paths and quiet mode set."""
    directory, work_dir, prefix = Path(request["script_dir"]), Path(request["work_dir"]), request["prefix"]
    env: dict[str, Any] = copy.deepcopy(dict(request["env"]))
    env.update({f"{prefix}_TMP_CURRENT_SCRIPT_PATH": str(directory),
                f"{prefix}_TMP_CURRENT_SCRIPT_REPO_PATH": str(directory.parent.parent),
                f"{prefix}_TMP_CURRENT_SCRIPT_WORK_PATH": str(work_dir),
                f"{prefix}_TMP_CURRENT_PATH": str(work_dir), f"{prefix}_QUIET": "yes"})
    return directory, work_dir, prefix, env, copy.deepcopy(dict(request["state"]))


def common_input(request: Mapping[str, Any]) -> dict[str, Any]:
    """What every customize.py function is given besides CM's common input: the tags."""
    return {"script_tags": request.get("tags", []), "variation_tags": request.get("variations", [])}


def run(request: Mapping[str, Any]) -> dict[str, Any]:
    directory, work_dir, prefix, env, state = start(request)
    substitute(env)
    for name in request.get("clean_files", []):
        (work_dir / name).unlink(missing_ok=True)
    customize = load_customize(directory)
    # made when first needed: a script with no customize.py needs none
    auto = functools.cache(lambda: automation(request, directory, work_dir, customize))
    common = common_input(request)
    lifecycle: list[dict[str, Any]] = []
    run_hooks("deps", request, env, state, lifecycle)
    start_env, start_state = copy.deepcopy(env), copy.deepcopy(state)
    skip = False
    if customize is not None and hasattr(customize, "preprocess"):
        try:
            pre = _check(customize.preprocess({**auto().common_input(env, state), **common}), "preprocess")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}{auto().version_miss_note(env)}") from None
        skip = bool(pre.get("skip"))
        if skip and pre.get("script"):
            return _instead(dict(pre["script"]), env, lifecycle)
    version = ""
    if not skip:
        try:
            run_hooks("prehook_deps", request, env, state, lifecycle)
        except RuntimeError as exc:  # an install after every found one missed the range: say both, as CM's log does
            missed = auto().version_miss_note(env).strip(" ()")
            raise RuntimeError(f"{missed}; then {exc}" if missed else str(exc)) from None
        place = ScriptPlace(directory, work_dir, dict(os.environ), request.get("timeout_s"))
        run_native(place, request.get("script_name", "run"), env, state)
        run_hooks("posthook_deps", request, env, state, lifecycle)
        if customize is not None and hasattr(customize, "postprocess"):
            post = _check(customize.postprocess({**auto().common_input(env, state), **common}), "postprocess")
            version = str(post.get("version", "") or "")
    if version and not _version_ok(version, env, prefix):
        wanted = {k: env.get(f"{prefix}_{k.upper()}", "") for k in ("version", "version_min", "version_max")}
        raise RuntimeError(f"detected version {version} does not meet the requested constraints {wanted}")
    if not skip:
        run_hooks("post_deps", request, env, state, lifecycle)
    new_env, new_state = select(env, request["new_env_keys"]), select(state, request["new_state_keys"])
    result = {"ok": True, "new_env": new_env, "new_state": new_state, "version": version or None,
              "lifecycle": lifecycle, "dependent_path": str(env.get(f"{prefix}_GET_DEPENDENT_CACHED_PATH") or "")}
    if (directory / "validate_cache.sh").is_file():
        result["validate_cache"] = {"env": {**start_env, **new_env}, "state": {**start_state, **new_state},
                                    "version": cached_version(env, prefix), "tags": common["script_tags"],
                                    "variations": common["variation_tags"]}
    return result


def automation(request: Mapping[str, Any], directory: Path, work_dir: Path, customize: ModuleType | None) -> Automation:
    """CM's ``i['automation']`` for the script's customize.py (and the version notes)."""
    from cmx_cm.automation import Automation  # deferred: only a customize.py

    return Automation(directory=directory, work_dir=work_dir, prefix=request["prefix"], os_info=os_info(),
                      meta=request["meta"], customize=customize, base_env=dict(os.environ),
                      timeout_s=request.get("timeout_s"))


def run_hooks(kind: str, request: Mapping[str, Any], env: dict[str, Any], state: dict[str, Any],
              lifecycle: list[dict[str, Any]]) -> None:
    """The script's run-time deps of ``kind`` (:func:`cmx_cm.lifecycle.run_hooks`), if it has any."""
    if not request.get("hooks"):
        return
    from cmx_cm.lifecycle import run_hooks as run  # deferred: only a script with run-time deps

    run(kind, request, env, state, lifecycle)


def _version_ok(version: str, env: Mapping[str, Any], prefix: str) -> bool:
    from cmx_cm.automation import version_ok  # deferred: only a detected version

    return version_ok(version, env, prefix)


def cached_version(env: Mapping[str, Any], prefix: str) -> str:
    """The version MLC records with a cache entry: the detected one, else the version key."""
    return str(env.get(f"{prefix}_DETECTED_VERSION") or env.get(f"{prefix}_VERSION") or "")


def validate(request: Mapping[str, Any]) -> dict[str, Any]:
    """MLC's check of a cache entry: ``validate_cache.sh`` run in a fresh directory with the
    entry's env, then customize.py's ``detect_version``; the version it finds, if any."""
    from cmx_cm.meta import load_script  # deferred: only a check of a cache entry reads the script's metadata

    request = {**request, "meta": json.loads(json.dumps(load_script(Path(request["script_dir"])).data, default=str))}
    directory, work_dir, _, env, state = start(request)
    customize = load_customize(directory)
    place = ScriptPlace(directory, work_dir, dict(os.environ), request.get("timeout_s"))
    run_native(place, "validate_cache", env, state)
    version = ""
    if customize is not None and hasattr(customize, "detect_version"):
        auto = automation(request, directory, work_dir, customize)
        found = _check(customize.detect_version({**auto.common_input(env, state), **common_input(request)}),
                       "detect_version")
        version = str(found.get("version", "") or "")
    return {"ok": True, "version": version or None}


def _instead(script: dict[str, Any], env: dict[str, Any], lifecycle: list[dict[str, Any]]) -> dict[str, Any]:
    """CM's ``preprocess`` answer ``{'skip': True, 'script': {'tags': ...}}``: another script
    runs instead (``cmind.access`` run, given this one's env), and its result is this one's."""
    from cmx_cm.actions import access  # deferred: only when preprocess names another script

    other = access({**script, "action": "run", "automation": "script", "env": env})
    lifecycle.append({"kind": "instead", "tags": str(script.get("tags", "")), "ran": other.get("return") == 0,
                      "reason": "preprocess skipped this script and named another to run instead"})
    if other.get("return", 1) > 0:
        raise RuntimeError(f"preprocess named another script to run instead, which failed: {other.get('error')}")
    return {"ok": True, "new_env": other.get("new_env") or {}, "new_state": other.get("new_state") or {},
            "version": other.get("version") or None, "lifecycle": lifecycle}


def main(argv: Sequence[str]) -> int:
    """``REQUEST RESULT`` runs the script; ``--validate REQUEST RESULT`` checks a cache entry."""
    checking = argv[:1] == ["--validate"]
    request_path, result_path = Path(argv[checking]), Path(argv[checking + 1])
    for stream in (sys.stdout, sys.stderr):  # a print reaches the log before run.sh writes there, as in CM
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)
    sys.path.insert(0, str(SHIM))
    builtins.input = _no_prompt
    request = json.loads(request_path.read_text())
    recipe_dir = request.get("recipe_dir")
    call_context.use(call_context.Context(Path(recipe_dir) if recipe_dir else None,
                                          str(request.get("prefix") or "CM"), request.get("timeout_s")))
    try:
        result = validate(request) if checking else run(request)
    except (Prompted, RuntimeError, OSError, KeyError, ValueError, TypeError, AttributeError, ImportError) as exc:
        import traceback  # deferred: a failure only

        print(traceback.format_exc(), file=sys.stderr)  # the step log keeps the script's traceback
        result = {"ok": False, "error": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}
    except Exception as exc:  # noqa: BLE001 - any failure of third-party script code is reported, not raised
        import traceback  # deferred: a failure only

        print(traceback.format_exc(), file=sys.stderr)
        result = {"ok": False, "error": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}
    partial = result_path.with_name(result_path.name + ".part")  # a runner killed mid-write leaves no result
    partial.write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    partial.replace(result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
