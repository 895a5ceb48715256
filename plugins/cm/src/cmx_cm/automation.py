"""The ``i['automation']`` object a ``customize.py`` gets: the handful of methods of CM's
script automation that scripts call (``run_native_script``, ``find_artifact``,
``parse_version``, ``detect_version_using_script``, ``get_default_path_list``...), written
for cmx-cm with CM's dict-in/dict-out convention, because the scripts expect it."""

from __future__ import annotations

import copy
import glob
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cmx_cm._shim import cmind
from cmx_cm._shim.cmind.utils import compare_versions, load_txt
from cmx_cm.native import ScriptError, ScriptPlace, run_native

Result = dict[str, Any]


@dataclass
class _Cmind:
    """What scripts reach through ``automation.cmind``: a logger and ``access``."""

    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("cmx.cm.script"))

    def access(self, i: dict[str, Any]) -> Result:
        result: Result = cmind.access(i)
        return result


def version_ok(detected: str, env: Mapping[str, Any], prefix: str) -> bool:
    """CM's constraint check: ``VERSION`` exact, ``VERSION_MIN`` <=, ``VERSION_MAX`` >=."""
    wanted = str(env.get(f"{prefix}_VERSION", ""))
    low = str(env.get(f"{prefix}_VERSION_MIN", ""))
    high = str(env.get(f"{prefix}_VERSION_MAX", ""))
    if wanted and wanted != detected:
        return False
    if low and compare_versions(detected, low) < 0:
        return False
    return not (high and compare_versions(detected, high) > 0)


@dataclass
class Automation:
    """One script's automation object; ``customize`` is its loaded ``customize.py``."""

    directory: Path
    work_dir: Path
    prefix: str
    os_info: dict[str, Any]
    meta: Mapping[str, Any]
    customize: ModuleType | None
    base_env: Mapping[str, str]
    timeout_s: float | None = None
    cmind: _Cmind = field(default_factory=_Cmind)
    tmp_file_ver: str = "tmp-ver.out"
    version_misses: list[tuple[str, str]] = field(default_factory=list)  # (candidate, version) outside the range

    @property
    def logger(self) -> logging.Logger:
        """MLC scripts log through ``i['automation'].logger``."""
        return self.cmind.logger

    @property
    def action_object(self) -> _Cmind:
        """MLC's name for what CM calls ``automation.cmind`` (``.logger``, ``.access``)."""
        return self.cmind

    # -- running the script's own native scripts -------------------------------------------

    def common_input(self, env: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return {"env": env, "state": state, "const": {}, "const_state": {}, "meta": self.meta, "automation": self,
                "os_info": self.os_info,
                "recursion_spaces": "  ", "run_script_input": {"env": env, "state": state, "path": str(self.directory)},
                "customize": self.meta.get("customize", {}), "input": {}, "artifact": _Artifact(self.directory,
                                                                                                 self.meta)}

    def _run(self, name: str, env: dict[str, Any], state: dict[str, Any], detect_version: bool) -> Result:
        try:
            run_native(ScriptPlace(self.directory, self.work_dir, self.base_env, self.timeout_s), name, env, state)
        except ScriptError as exc:
            return {"return": 2, "error": str(exc)}
        if detect_version and self.customize is not None and hasattr(self.customize, "detect_version"):
            result: Result = self.customize.detect_version(self.common_input(env, state))
            return result
        return {"return": 0}

    def run_native_script(self, i: dict[str, Any]) -> Result:
        env = i.get("env") or {}
        state = copy.deepcopy((i.get("run_script_input") or {}).get("state", {}))
        result = self._run(i["script_name"], env, state, bool(i.get("detect_version")))
        result["env_tmp"] = copy.deepcopy(env)
        return result

    def detect_version_using_script(self, i: dict[str, Any]) -> Result:
        env = i.get("env") or {}
        state = copy.deepcopy((i.get("run_script_input") or {}).get("state", {}))
        result = self._run("run", env, state, True)
        version = str(result.get("version", "")) if result.get("return") == 0 else ""
        if version and version_ok(version, env, self.prefix):
            return {"return": 0, "detected_version": version}
        return {"return": 16, "error": "version was not detected"}

    # -- finding things --------------------------------------------------------------------

    def get_default_path_list(self, i: dict[str, Any]) -> list[str]:
        key = i.get("default_path_env_key", "")
        return os.environ.get(key, "").split(os.pathsep) if key else []

    def find_artifact(self, i: dict[str, Any]) -> Result:
        """The first file named ``file_name`` on the search path (whose detected version meets
        the script's constraints when ``detect_version``); sets ``env[env_path_key]``."""
        env: dict[str, Any] = i["env"]
        defaults = self.get_default_path_list(i)
        forced = str(env.get(f"{self.prefix}_INPUT", "")).strip()
        file_name = i["file_name"]
        tmp_path = str(env.get(f"{self.prefix}_TMP_PATH", ""))
        paths = tmp_path.split(os.pathsep) if tmp_path else defaults
        if forced:
            if not os.path.isfile(forced):
                return {"return": 1, "error": f"file {forced} doesn't exist"}
            file_name, paths = os.path.basename(forced), [os.path.dirname(forced)]
        found = self._search(paths, file_name, i, env)
        if found is None:
            return {"return": 16, "error": f"{file_name} not found"}
        found_path = os.path.dirname(found)
        if found_path not in defaults and i.get("default_path_env_key"):
            key = "+" + i["default_path_env_key"]
            env.setdefault(key, [])
            if found_path not in env[key]:
                env[key].insert(0, found_path)
            for extra, env_key in (i.get("extra_paths") or {}).items():
                extra_path = os.path.normpath(os.path.join(found_path, "..", extra))
                if os.path.exists(extra_path):
                    env.setdefault(env_key, []).append(extra_path)
        if i.get("env_path_key"):
            env[i["env_path_key"]] = found
        return {"return": 0, "found_path": found_path, "found_file_path": found,
                "found_file_name": os.path.basename(found), "default_path_list": defaults}

    def _search(self, paths: list[str], file_name: str, i: dict[str, Any], env: dict[str, Any]) -> str | None:
        seen: list[str] = []
        for directory in paths:
            for candidate in sorted(glob.glob(os.path.join(directory, file_name))) if directory else []:
                if candidate in seen or not os.path.isfile(candidate):
                    continue
                seen.append(candidate)
                if self._accept(candidate, i, env):
                    return candidate
        return None

    def _accept(self, candidate: str, i: dict[str, Any], env: dict[str, Any]) -> bool:
        hook: Callable[[dict[str, Any]], Result] | None = i.get("hook")
        if hook is not None and hook({"file": candidate}).get("skip"):
            return False
        if not i.get("detect_version"):
            return True
        trial = copy.deepcopy(env)
        if i.get("env_path_key"):
            trial[i["env_path_key"]] = candidate
        result = self._run("run", trial, {}, True)
        version = str(result.get("version", "")) if result.get("return") == 0 else ""
        if version and not version_ok(version, env, self.prefix):
            print(f"    Detected version: {version}\n    SKIPPED due to version constraints ...", flush=True)
            self.version_misses.append((candidate, version))
            return False
        return bool(version)

    def version_miss_note(self, env: Mapping[str, Any]) -> str:
        """What CM says when candidates were found but none met the constraints ('' if none)."""
        if not self.version_misses:
            return ""
        wanted = ", ".join(f"{k.lower()}={env[f'{self.prefix}_{k}']}" for k in
                           ("VERSION", "VERSION_MIN", "VERSION_MAX", "VERSION_MAX_USABLE")
                           if env.get(f"{self.prefix}_{k}"))
        found = ", ".join(f"{path} {version}" for path, version in self.version_misses[:4])
        return f" (found {found}: SKIPPED due to version constraints {wanted})"

    def parse_version(self, i: dict[str, Any]) -> Result:
        path = str(self.work_dir / (i.get("file_name") or self.tmp_file_ver))
        result: Result = load_txt(file_name=path, check_if_exists=True, split=True, match_text=i["match_text"],
                                  fail_if_no_match="version was not detected")
        if result["return"] > 0:
            return result
        match = result["match"]
        group = int(i["group_number"])
        if not match.lastindex or match.lastindex < group:
            return {"return": 1, "error": f"version was not detected: group {group} is not in the match"}
        version = match.group(group)
        i["which_env"][i["env_key"]] = version
        i["which_env"][f"{self.prefix}_DETECTED_VERSION"] = version
        return {"return": 0, "version": version, "string": result["string"]}

    def clean_some_tmp_files(self, i: dict[str, Any]) -> Result:
        for name in ("tmp-ver.out", "tmp-run-env.out", "tmp-run-state.json"):
            (self.work_dir / name).unlink(missing_ok=True)
        return {"return": 0}

    def _available_variations(self, i: dict[str, Any]) -> Result:
        names = ", ".join(sorted((i.get("meta") or self.meta).get("variations", {})))
        return {"return": 1, "error": f"select a variation of this script (one of: {names})"}

    def update_deps(self, i: dict[str, Any]) -> Result:
        return {"return": 1, "error": "update_deps changes deps while the script runs; cmx plans deps before "
                                      "running, so a recipe must select them with inputs or variations"}


@dataclass(frozen=True)
class _Artifact:
    path: Path
    meta: Mapping[str, Any]
