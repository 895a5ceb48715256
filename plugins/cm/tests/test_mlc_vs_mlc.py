"""Hand-written MLC scripts run by the real MLC (``mlcflow``) and through the bridge.

No MLC script collection installs from the package registry (docs/cm-bridge.md, "MLC
collections"), but MLC itself does: ``mlcflow`` goes into a separate virtual environment,
made once and kept under the temp directory (``CMX_MLC_TEST_VENV`` overrides where), with the
version pinned below. Each test writes its scripts into MLC's own local repository
(``MLC_REPOS/local/script``, which MLC reads with no network) and imports the same folder
into cmx; both must give the same ``new_env`` key by key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cm_helpers import kill_all, left_running, outputs, pinned_venv, precedence_scripts, write_script

from cmx_cm import cache_check

MLCFLOW = "mlcflow==1.3.8"
REFERENCE = Path(__file__).parent / "reference_run.py"
HEAD = 'uid: "{uid}"\nautomation_alias: script\nautomation_uid: 5b4e0237da074764\n'


@pytest.fixture(scope="session")
def mlc_venv() -> Path:
    default = Path(tempfile.gettempdir()) / "cmx-mlc-mlcflow-1.3.8"
    return pinned_venv(Path(os.environ.get("CMX_MLC_TEST_VENV") or default), [MLCFLOW])


def mlc_scripts(tmp: Path) -> Path:
    """MLC's local repository's script folder (``MLC_REPOS`` is ``tmp/mlc-repos``)."""
    return tmp / "mlc-repos" / "local" / "script"


def mlc_run(venv: Path, tags: str, tmp: Path, env: dict[str, str] | None = None,
            process: dict[str, str] | None = None) -> dict[str, Any]:
    """MLC's outputs for ``tags``, run in ``tmp`` with its repos in ``tmp/mlc-repos``; ``env``
    is MLC's ``env`` input, ``process`` variables set for the MLC process."""
    out = tmp / f"mlc-{re.sub(r'[^A-Za-z0-9_.-]', '_', tags)}.json"
    process_env = {**os.environ, **(process or {}), "MLC_REPOS": str(tmp / "mlc-repos")}
    done = subprocess.run([str(venv / "bin" / "python"), str(REFERENCE), "mlc", tags, str(out), json.dumps(env or {})],
                          cwd=tmp, env=process_env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600, check=False)
    assert out.is_file(), done.stderr[-2000:]
    document: dict[str, Any] = json.loads(out.read_text())
    assert "error" not in document, document
    return document


def import_scripts(cmx_cli: Callable[..., Any], tmp: Path) -> Path:
    out = tmp / "recipes"
    assert cmx_cli("import", "cm", str(mlc_scripts(tmp)), "--out", str(out)).returncode == 0
    return out


def test_a_callers_env_yields_to_the_scripts_own_env_as_in_mlc(mlc_venv: Path, tmp_path: Path,
                                                               cmx_cli: Callable[..., Any]) -> None:
    """MLC, like CM, sets a script's own ``env`` and its selected variations' (a group's
    default included) over what a caller passes; get-generic-sys-util's install dependency
    relies on it. The bridge gave the caller's value (or refused the plan) before."""
    precedence_scripts(mlc_scripts(tmp_path), "MLC", HEAD, [("envp-top", "deps", "envpleaf,_v")], meta_file="meta.yaml")
    reference = mlc_run(mlc_venv, "envptop", tmp_path)
    recipes = import_scripts(cmx_cli, tmp_path)
    got = outputs(cmx_cli("run", "recipe", "--tags=mlc,envp-top", "--recipes", str(recipes), "--json", cwd=tmp_path))
    assert got["new_env"] == reference["new_env"]
    assert got["new_env"] == {"MLC_ENVP_SEEN_META": "meta", "MLC_ENVP_SEEN_VAR": "variation",
                              "MLC_ENVP_SEEN_GROUP": "d", "MLC_ENVP_SEEN_DEFAULT": "caller",
                              "MLC_ENVP_SEEN_FREE": "caller"}


DETECT = """
def detect_version(i):
    r = i['automation'].parse_version({'match_text': r'vtool\\s+([\\d.]+)', 'group_number': 1,
                                       'env_key': 'MLC_VTOOL_VERSION', 'which_env': i['env']})
    if r['return'] > 0:
        return r
    return {'return': 0, 'version': r['version']}


def postprocess(i):
    return detect_version(i)
"""


def _vtool_script(root: Path, *, validated: bool) -> Path:
    """get-vtool: a cached detection of a tool's version; with ``validated``, the
    ``validate_cache.sh`` MLC runs before it serves the cache entry. Each real run adds a line
    to ``MLC_VTOOL_RUNS``."""
    directory = write_script(root, "get-vtool", f"alias: get-vtool\n{HEAD.format(uid='b1' * 8)}tags: [get, vtool]\n"
                                                "cache: true\nnew_env_keys: [MLC_VTOOL_VERSION]\n",
                             customize=DETECT, run_sh='echo run >> "$MLC_VTOOL_RUNS"\nvtool > tmp-ver.out\n',
                             meta_file="meta.yaml")
    if validated:
        (directory / "validate_cache.sh").write_text("#!/bin/bash\nvtool > tmp-ver.out\n")
    return directory


def _tool(path: Path, version: str) -> None:
    path.write_text(f"#!/bin/sh\necho vtool {version}\n")
    path.chmod(0o755)


@pytest.mark.parametrize("validated", [True, False], ids=["validate_cache", "none"])
def test_a_cached_detection_is_checked_by_validate_cache_as_in_mlc(validated: bool, mlc_venv: Path, tmp_path: Path,
                                                                   cmx_cli: Callable[..., Any]) -> None:
    """Four runs of a cached version detection of ``vtool`` (found on PATH, so nothing the
    entry records names its file), the tool upgraded after the second: with a
    ``validate_cache.sh`` the third run finds the entry stale (the version it detects is not
    the one recorded) and detects again; without one the entry (and its old version) stays.
    MLC and the bridge agree on every run's version and on how many times the script ran."""
    _vtool_script(mlc_scripts(tmp_path), validated=validated)
    recipes = import_scripts(cmx_cli, tmp_path)
    seen: dict[str, list[str]] = {"mlc": [], "cmx": []}
    (tmp_path / "bin").mkdir()
    path = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    for run in range(4):
        if run in (0, 2):
            _tool(tmp_path / "bin" / "vtool", "1.0" if run == 0 else "2.0")
        for side in seen:
            env = {"MLC_VTOOL_RUNS": str(tmp_path / f"runs-{side}")}
            if side == "mlc":
                new_env = mlc_run(mlc_venv, "get,vtool", tmp_path, env, process=path)["new_env"]
            else:
                new_env = outputs(cmx_cli("cm", "run", "script", "--tags=get,vtool", "--recipes", str(recipes),
                                          "--json", f"--env.MLC_VTOOL_RUNS={env['MLC_VTOOL_RUNS']}", env=path,
                                          cwd=tmp_path))["new_env"]
            seen[side].append(new_env["MLC_VTOOL_VERSION"])
    assert seen["cmx"] == seen["mlc"]
    assert seen["cmx"] == (["1.0", "1.0", "2.0", "2.0"] if validated else ["1.0"] * 4)
    runs = {side: len((tmp_path / f"runs-{side}").read_text().splitlines()) for side in seen}
    assert runs == {"mlc": 1 + validated, "cmx": 1 + validated}


def test_a_cache_entry_whose_dependent_path_is_gone_is_stale_as_in_mlc(mlc_venv: Path, tmp_path: Path,
                                                                      cmx_cli: Callable[..., Any]) -> None:
    """A script that names the file its detection depends on in ``MLC_GET_DEPENDENT_CACHED_PATH``
    (in its env, not among its ``new_env_keys``, and no output names it): once the file is
    gone, MLC and cmx run it again."""
    write_script(mlc_scripts(tmp_path), "get-deptool",
                 f"alias: get-deptool\n{HEAD.format(uid='c2' * 8)}tags: [get, deptool]\ncache: true\n"
                 "new_env_keys: [MLC_DEPTOOL_FOUND]\n", meta_file="meta.yaml",
                 run_sh='echo run >> "$MLC_DEPTOOL_RUNS"\nfound=$(command -v deptool || echo none)\n'
                        'echo "MLC_DEPTOOL_FOUND=$(basename "$found")" > tmp-run-env.out\n'
                        'echo "MLC_GET_DEPENDENT_CACHED_PATH=$found" >> tmp-run-env.out\n')
    recipes = import_scripts(cmx_cli, tmp_path)
    (tmp_path / "bin").mkdir()
    _tool(tmp_path / "bin" / "deptool", "1.0")
    path = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    seen: dict[str, list[str]] = {"mlc": [], "cmx": []}
    for run in range(3):
        if run == 2:
            (tmp_path / "bin" / "deptool").unlink()
        for side in seen:
            runs = str(tmp_path / f"runs-{side}")
            if side == "mlc":
                new_env = mlc_run(mlc_venv, "get,deptool", tmp_path, {"MLC_DEPTOOL_RUNS": runs},
                                  process=path)["new_env"]
            else:
                new_env = outputs(cmx_cli("cm", "run", "script", "--tags=get,deptool", "--recipes", str(recipes),
                                          "--json", f"--env.MLC_DEPTOOL_RUNS={runs}", env=path,
                                          cwd=tmp_path))["new_env"]
            seen[side].append(new_env["MLC_DEPTOOL_FOUND"])
    assert seen["cmx"] == seen["mlc"] == ["deptool", "deptool", "none"]
    assert {side: len((tmp_path / f"runs-{side}").read_text().splitlines()) for side in seen} == {"mlc": 2, "cmx": 2}


def test_a_validate_cache_check_that_hangs_is_stopped_and_keeps_the_entry(tmp_path: Path,
                                                                          cmx_cli: Callable[..., Any]) -> None:
    """cmx's bound, which MLC lacks: a ``validate_cache.sh`` that never ends is stopped at the
    step's time limit with what it started (its shell, a background sleep), and the entry is
    served as after any failed check (the script ran once)."""
    directory = _vtool_script(mlc_scripts(tmp_path), validated=True)
    pids = tmp_path / "check-pids"
    (directory / "validate_cache.sh").write_text(f"#!/bin/bash\necho $$ >> {pids}\nsleep 3601 &\necho $! >> {pids}\n"
                                                 "sleep 3600\n")
    recipes = import_scripts(cmx_cli, tmp_path)
    recipe_file = recipes / "mlc.get-vtool.yaml"
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["steps"][0]["with"]["timeout_s"] = 20  # bounds the script's first run too: not sized to the machine
    recipe_file.write_text(yaml.safe_dump(recipe))
    (tmp_path / "bin").mkdir()
    _tool(tmp_path / "bin" / "vtool", "1.0")
    path = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    runs = tmp_path / "runs"
    for _ in range(2):
        got = outputs(cmx_cli("cm", "run", "script", "--tags=get,vtool", "--recipes", str(recipes), "--json",
                              f"--env.MLC_VTOOL_RUNS={runs}", env=path, cwd=tmp_path, timeout=240))
        assert got["new_env"] == {"MLC_VTOOL_VERSION": "1.0"}
    assert len(runs.read_text().splitlines()) == 1
    checked = [int(pid) for pid in pids.read_text().split()]
    try:
        assert len(checked) == 2 and left_running(checked) == []
    finally:
        kill_all(checked)



@pytest.mark.timeout(600)
def test_a_check_of_a_step_without_a_time_limit_is_bounded_by_check_limit_s(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the step sets no time limit (MLC's scripts set none), a check is bounded by
    ``CHECK_LIMIT_S`` (300 s; 5 s here), stopped with what it started, and keeps the entry."""
    directory = _vtool_script(mlc_scripts(tmp_path), validated=True)
    pids = tmp_path / "check-pids"
    (directory / "validate_cache.sh").write_text(f"#!/bin/bash\necho $$ >> {pids}\nsleep 3601 &\necho $! >> {pids}\n"
                                                 "sleep 3600\n")
    monkeypatch.setattr(cache_check, "CHECK_LIMIT_S", 5.0)
    try:
        assert cache_check.version_holds(directory, "MLC", {"env": {}, "state": {}, "version": "1.0"}, None) is True
        checked = [int(pid) for pid in pids.read_text().split()]
        assert len(checked) == 2 and left_running(checked) == []
    finally:
        kill_all([int(pid) for pid in pids.read_text().split()] if pids.is_file() else [])
