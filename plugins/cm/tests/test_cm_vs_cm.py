"""The cmx4mlops collection (CM's 300-odd scripts) imported and compared with CM itself.

CM (``cmind``) is never installed next to cmx (its own ``cmx`` console script would shadow
ours): it goes into a separate virtual environment, made once and kept under the temp
directory (``CMX_CM_TEST_VENV`` overrides where), with the versions pinned below. The same
offline cases (``CASES``: 40 scripts of the collection, some with several variations; ``SCRIPTS``
lists them by tags) then run through ``cm`` in that venv and through ``cmx`` here, on this
machine: both must succeed, cmx must run the script named, and their ``new_env`` (and
``new_state``) must be equal key by key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cm_helpers import ENVP_KEYS, outputs, pinned_venv, precedence_scripts, write_script

from cmx_cm.actions import SERVED  # type: ignore[import-untyped, unused-ignore]  # cmx_cm has no py.typed

CMIND, CMX4MLOPS = "cmind==4.2.0", "cmx4mlops==1.0.1"
REFERENCE = Path(__file__).parent / "reference_run.py"
CASES: dict[str, dict[str, str]] = {  # script alias -> {cmx tags: CM tags}, one entry per case
    "detect-os": {"cm,detect,os": "detect,os"},
    "detect-cpu": {"cm,detect,cpu": "detect,cpu"},
    "get-python3": {
        "cm,get,python3": "get,python3",
        "cm,get,python3,custom-path./usr/bin/python3": "get,python3,_custom-path./usr/bin/python3",
        "cm,get,python3,lto": "get,python3,_lto",
        "cm,get,python3,shared": "get,python3,_shared",
        "cm,get,python3,with-ssl": "get,python3,_with-ssl",
        "cm,get,python3,optimized": "get,python3,_optimized",
    },
    "get-generic-python-lib": {
        "cm,get,generic-python-lib,pip": "get,generic-python-lib,_pip",
        # depends on itself with _pip: the self-dep that cmx's resolver plans since 64a0ccc
        "cm,get,generic-python-lib,package.numpy": "get,generic-python-lib,_package.numpy",
    },
    # post_deps get,compiler-flags, run after the script with its env (its get,compiler dep skipped)
    "get-gcc": {"cm,get,gcc": "get,gcc"},
    "get-java": {"cm,get,java": "get,java"},
    "get-openssl": {"cm,get,openssl": "get,openssl"},
    "get-docker": {"cm,get,docker": "get,docker"},
    "print-python-version": {"cm,print,python-version": "print,python-version"},
    "print-any-text": {"cm,print,any-text": "print,any-text"},
    "detect-sudo": {"cm,detect,sudo": "detect,sudo"},
    "get-sys-utils-min": {"cm,get,sys-utils-min": "get,sys-utils-min"},
    # found by running the collection's offline scripts through both (2026-12-07)
    "get-cmake": {"cm,get-cmake": "get,cmake,get-cmake"},
    "get-javac": {"cm,get,javac": "get,javac"},
    "get-terraform": {"cm,get,terraform": "get,terraform"},
    "get-cuda": {  # the CUDA toolkit's files, no GPU needed
        "cm,get-cuda": "get,cuda",
        "cm,get,cuda,toolkit": "get,cuda,_toolkit",
    },
    "print-hello-world": {
        "cm,print-hello-world": "print,hello-world,native-script",
        "cm,print-hello-world,text.foo": "print,hello-world,native-script,_text.foo",
        "cm,print-hello-world,skip_print_env": "print,hello-world,native-script,_skip_print_env",
    },
    "dump-pip-freeze": {"cm,dump,pip,freeze": "dump,pip,freeze"},  # new_state only
    "test-cm-scripts": {
        "cm,test-cm-scripts": "test,test-scripts",
        "cm,test-cm-scripts,v1": "test,test-scripts,_v1",
    },
    "get-dataset-imagenet-helper": {"cm,get,imagenet,helper": "get,imagenet,helper"},
    "get-preprocesser-script-generic": {"cm,get,preprocessor,generic": "get,preprocessor,generic"},
    "get-generic-sys-util": {
        "cm,get,generic-sys-util,cmake": "get,generic-sys-util,_cmake",
        "cm,get,generic-sys-util,detect,cmake": "get,generic-sys-util,_detect,_cmake",
        "cm,get,generic-sys-util,libbz2-dev": "get,generic-sys-util,_libbz2-dev",
        "cm,get,generic-sys-util,libffi7": "get,generic-sys-util,_libffi7",
        "cm,get,generic-sys-util,liblzma-dev": "get,generic-sys-util,_liblzma-dev",
        "cm,get,generic-sys-util,libncurses-dev": "get,generic-sys-util,_libncurses-dev",
        "cm,get,generic-sys-util,libssl-dev": "get,generic-sys-util,_libssl-dev",
        "cm,get,generic-sys-util,systemd": "get,generic-sys-util,_systemd",
        "cm,get,generic-sys-util,tk-dev": "get,generic-sys-util,_tk-dev",
        "cm,get,generic-sys-util,vim-common": "get,generic-sys-util,_vim-common",
        "cm,get,generic-sys-util,wget": "get,generic-sys-util,_wget",
        "cm,get,generic-sys-util,xz": "get,generic-sys-util,_xz",
    },
    # issue 48: the collection's other scripts that run offline here, each tried in CM first (2026-12-07)
    "get-aws-cli": {"cm,get,aws-cli": "get,aws-cli"},
    "get-lib-qaic-api": {"cm,get-lib-qaic-api": "get,lib-qaic-api"},  # paths into the script's own folder
    "get-ml-model-using-imagenet-from-model-zoo": {  # no model variation: its env, no download
        "cm,get-ml-model-using-imagenet-from-model-zoo": "get,ml-model,model-zoo,imagenet",
    },
    "print-hello-world-java": {"cm,print-hello-world-java": "print,hello-world,java"},
    "print-hello-world-javac": {"cm,print-hello-world-javac": "print,hello-world,javac"},  # compiles, then runs
    "run-python": {"cm,run-python": "run,python"},  # python3 with no command, on an empty stdin
    "set-venv": {"cm,set-venv": "set,venv"},  # python3 -m venv in the work directory
    "set-user-limits": {
        "cm,set-user-limits": "set,user,limits",
        "cm,set-user-limits,large-nofile": "set,user,limits,_large-nofile",  # ulimit -n 9999
    },
    "set-echo-off-win": {"cm,set-echo-off-win": "set,echo,off,win"},  # Windows only: nothing on Linux
    "get-rclone-config": {"cm,get-rclone-config": "get,rclone-config"},  # no config asked for: no command
    "install-pip-package-for-cmind-python": {  # no package asked for: nothing installed
        "cm,install-pip-package-for-cmind-python": "install,pip-package,for-cmind-python",
    },
    "save-mlperf-inference-implementation-state": {  # no implementation state: nothing saved
        "cm,save-mlperf-inference-implementation-state": "save,mlperf,inference,implementation,state",
    },
    "fail": {"cm,fail": "fail,filter"},  # fails only on Windows when asked to
    "test-dummy": {"cm,test,dummy": "test,dummy"},
    "test-cm-core": {"cm,test-cm-core": "test,cm,core"},
    "test-cm-script-pipeline": {"cm,test,cm-script,pipeline": "test,cm-script,pipeline"},  # 3 run-time deps
    "test-deps-conditions": {"cm,test,deps,conditions": "test,deps,conditions"},  # enable_if/skip_if deps
    "test-deps-conditions2": {"cm,test,deps,conditions2": "test,deps,conditions2"},
}
SCRIPTS = {cmx: cm for cases in CASES.values() for cmx, cm in cases.items()}  # cmx tags -> CM tags
SCRIPT_OF = {cmx: alias for alias, cases in CASES.items() for cmx in cases}  # cmx tags -> the script run
RUN = "detect-os,detect-cpu,get-python3,get-generic-python-lib:_pip,get-generic-python-lib:_package.numpy"


@pytest.fixture(scope="session")
def cm_venv() -> Path:
    return pinned_venv(Path(os.environ.get("CMX_CM_TEST_VENV") or Path(tempfile.gettempdir()) / "cmx-cm-cmind-4.2.0"),
                       [CMIND, CMX4MLOPS])


def cm_collection(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/cmx4mlops/repo/script"))
    assert found, f"no cmx4mlops scripts under {venv}"
    return found[0]


INDEX_ONLY = """
import sys
import cmind
r = cmind.access({"action": "search", "automation": "script", "tags": "detect,os"})
sys.exit(r["return"])
"""


@pytest.fixture(scope="module")
def cm_repos(cm_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CM's repos directory as CM leaves it on its first start: its index of the installed
    scripts (seconds of CPU that CM would spend again in every test's fresh directory) and an
    empty local repo: no cache entry, no script. Each test runs CM on a copy of it."""
    home = tmp_path_factory.mktemp("cm-index")
    repos = home / "cm-repos"
    done = subprocess.run([str(cm_venv / "bin" / "python"), "-c", INDEX_ONLY], cwd=home,
                          env={**os.environ, "CM_REPOS": str(repos)}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (repos / "index.json").is_file() and not (repos / "repos" / "local" / "cache").exists()
    return repos


def cm_run(venv: Path, tags: str, tmp: Path, repos: Path | None = None,
           env: dict[str, str] | None = None) -> dict[str, Any]:
    """CM's outputs for ``tags``, run in ``tmp`` with its repos in ``tmp/cm-repos`` (a copy of
    ``repos`` when given and the test has not made its own); ``env`` is CM's ``env`` input
    (``--env.KEY=VALUE`` on its command line)."""
    if repos is not None and not (tmp / "cm-repos").exists():
        shutil.copytree(repos, tmp / "cm-repos", symlinks=True)
    out = tmp / f"cm-{re.sub(r'[^A-Za-z0-9_.-]', '_', tags)}.json"
    process_env = {**os.environ, "CM_REPOS": str(tmp / "cm-repos")}  # CM's own 'local' repo is cm-repos/repos/local
    # stdin closed, as cmx closes it for a script: run-python with no command reads its program there
    subprocess.run([str(venv / "bin" / "python"), str(REFERENCE), "cm", tags, str(out), json.dumps(env or {})], cwd=tmp,
                   env=process_env,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=600, check=False)
    document: dict[str, Any] = json.loads(out.read_text())
    assert "error" not in document, document
    return document


@pytest.fixture(scope="module")
def imported(cm_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cm-recipes")
    done = subprocess.run([sys.executable, "-m", "cmx_core", "import", "cm", str(cm_collection(cm_venv)), "--out",
                           str(out), "--json"], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["imported"] == report["scripts"] > 300 and not report["failed"]
    return out


# Machine state that other processes change while the scripts run: detect-cpu's
# CM_HOST_DISK_CAPACITY is `df -h --total -l`, the total size of the mounted local filesystems,
# and the containers and sandboxes of other work mount and unmount them within seconds. Both
# sides must report it, in df's form; its value is not the bridge's doing.
VOLATILE = {"CM_HOST_DISK_CAPACITY": re.compile(r"^\d+(\.\d+)?[KMGTPE]?$")}


# scripts that declare no new_env (or leave what they declare unset), in CM as in cmx: the case
# compares that both succeed and both return nothing
EMPTY = {"print-any-text", "get-sys-utils-min", "print-python-version", "print-hello-world-java",
         "print-hello-world-javac", "run-python", "set-venv", "set-user-limits", "set-echo-off-win",
         "get-rclone-config", "install-pip-package-for-cmind-python", "save-mlperf-inference-implementation-state",
         "fail", "test-dummy", "test-cm-core", "test-cm-script-pipeline", "test-deps-conditions",
         "test-deps-conditions2"}


@pytest.mark.parametrize("tags", list(SCRIPTS))
def test_same_outputs_as_cm(tags: str, cm_venv: Path, cm_repos: Path, imported: Path, tmp_path: Path,
                            cmx_cli: Callable[..., Any]) -> None:
    reference = cm_run(cm_venv, SCRIPTS[tags], tmp_path, cm_repos)
    proc = cmx_cli("run", "recipe", f"--tags={tags}", "--recipes", str(imported), "--json", cwd=tmp_path)
    got = outputs(proc)
    assert json.loads(proc.stdout)["software"]["recipe"]["name"] == f"cm.{SCRIPT_OF[tags]}"
    for key, form in VOLATILE.items():
        if key in reference["new_env"] or key in got["new_env"]:
            assert form.match(reference["new_env"].pop(key)) and form.match(got["new_env"].pop(key)), key
    assert got["new_env"] == reference["new_env"]
    assert got["new_state"] == reference["new_state"]
    if SCRIPT_OF[tags] in EMPTY:
        assert not got["new_env"] and not got["new_state"], "a script listed as returning nothing returned something"
    else:
        assert got["new_env"] or got["new_state"], "the comparison must not be between two empty results"


def test_coverage_report_over_cmx4mlops(cm_venv: Path, tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    out = tmp_path / "recipes"
    proc = cmx_cli("import", "cm", str(cm_collection(cm_venv)), "--out", str(out), "--report",
                   "--run", RUN, "--json", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    document = json.loads(proc.stdout)
    cov = document["coverage"]
    assert cov["scripts"] > 300 and cov["imported"] == cov["scripts"]
    assert 0 < cov["planned"] <= cov["imported"]
    # all 306 with cmx4mlops 1.0.1: bert-base-squad's post dep on a missing script is a run-time dep
    assert cov["planned"] >= 306, cov["plan_errors"]
    assert len(cov["plan_errors"]) == cov["imported"] - cov["planned"]
    assert (cov["run_attempted"], cov["ran"]) == (5, 5), cov["runs"]
    # scripts with no key unmapped or approximated: 97 of 306 before run-time deps and combinations
    # 126, then 119 once the report named the cmind.access calls not served, 127 with reuse_version carried
    assert cov["fully_mapped"] >= 127, cov["fully_mapped"]
    # 262 approximated keys before adr was handed down the tree (200 of them adr), 97 after (13 adr)
    assert document["issue_counts"]["approximated"] <= 97, document["issue_counts"]
    report = json.loads((out / "report.json").read_text())
    adr = [i for i in report["issues"] if i["kind"] == "approximated"
           and i["key"].endswith((".adr", ".add_deps_recursive"))]
    assert len(adr) <= 13 and all("parameter" in i["reason"] for i in adr), adr
    assert document["issue_counts"]["unmapped"] <= 1199, document["issue_counts"]
    access = [i for i in report["issues"] if i["key"].startswith("customize.py:access(")]
    assert len(access) == 16 and all(i["kind"] == "unmapped" and "not served" in i["reason"] for i in access)
    assert any(i["key"] == "variations.llama3_1-405b.adr" and i["kind"] == "unmapped" for i in report["issues"])


VERSION_MISS = """
import json, sys
import cmind
r = cmind.access({"action": "run", "automation": "script", "tags": sys.argv[1], "quiet": True, "out": None,
                  "version_min": "99"})
print(json.dumps({"return": r.get("return"), "error": r.get("error")}))
"""


def test_version_range_miss_is_reported_as_cm_reports_it(cm_venv: Path, cm_repos: Path, imported: Path,
                                                         tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """get-gcc with --version_min=99 on a gcc-12 machine: CM says 'gcc not found' (return 16)
    after 'SKIPPED due to version constraints'; cmx fails the same way, in one line."""
    script = tmp_path / "version_miss.py"
    script.write_text(VERSION_MISS)
    shutil.copytree(cm_repos, tmp_path / "cm-repos", symlinks=True)
    done = subprocess.run([str(cm_venv / "bin" / "python"), str(script), "get,gcc"], cwd=tmp_path,
                          env={**os.environ, "CM_REPOS": str(tmp_path / "cm-repos")}, capture_output=True,
                          text=True, timeout=600, check=False)
    reference = json.loads(done.stdout.strip().splitlines()[-1])
    assert reference["return"] == 16
    proc = cmx_cli("run", "recipe", "--tags=cm,get,gcc", "--recipes", str(imported), "--version_min=99", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("cmx: error:"))
    assert reference["error"] in error and "SKIPPED due to version constraints version_min=99" in error


@pytest.mark.parametrize("tags", ["get,cmake", "print,hello-world"])
def test_cm_command_line_takes_the_script_cm_takes(tags: str, cm_venv: Path, cm_repos: Path, imported: Path,
                                                   tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """``get,cmake`` also names a variation of get-generic-sys-util, and ``print,hello-world``
    matches 4 scripts: ``cmx cm run script`` takes the script CM takes, with the same result."""
    reference = cm_run(cm_venv, tags, tmp_path, cm_repos)
    proc = cmx_cli("cm", "run", "script", f"--tags={tags}", "--recipes", str(imported), "--json", cwd=tmp_path)
    got = outputs(proc)
    assert got["new_env"] == reference["new_env"] and got["new_state"] == reference["new_state"]
    assert got["new_env"], "the comparison must not be between two empty results"
    if tags == "print,hello-world":
        assert "match 4 scripts; took print-hello-world (sort 0" in proc.stderr


SCRIPT_HEAD = 'uid: "{uid}"\nautomation_alias: script\nautomation_uid: 5b4e0237da074764\n'


def _adr_collection(root: Path) -> None:
    """adr-top's variation ``pick`` changes, through ``adr``, a dep and a post dep of adr-mid, the
    script below it (neither is one of adr-top's own deps)."""
    for n, (alias, tag, var, key) in enumerate((("adr-leaf", "adrleaf", "x", "LEAF"),
                                                ("adr-late", "adrlate", "y", "LATE"))):
        variations = f"variations:\n  {var}: {{env: {{CM_{key}_VAR: {var}}}}}\n"
        write_script(root, alias, f"alias: {alias}\n{SCRIPT_HEAD.format(uid=f'a{n}' * 8)}tags: [{tag}]\n"
                                  f"new_env_keys: [CM_{key}_*]\n{variations}",
                     run_sh=f'echo "CM_{key}_SEEN=${{CM_{key}_VAR:-plain}}" > tmp-run-env.out\n')
    write_script(root, "adr-mid", f"alias: adr-mid\n{SCRIPT_HEAD.format(uid='b2' * 8)}tags: [adrmid]\n"
                                  "new_env_keys: [CM_LEAF_*, CM_LATE_*]\ndeps:\n  - {tags: adrleaf, names: [leaf]}\n"
                                  "post_deps:\n  - {tags: adrlate, names: [late]}\n")
    write_script(root, "adr-top", f"alias: adr-top\n{SCRIPT_HEAD.format(uid='c3' * 8)}tags: [adrtop]\n"
                                  "new_env_keys: [CM_LEAF_*, CM_LATE_*]\ndeps:\n  - {tags: adrmid}\n"
                                  "variations:\n  pick: {adr: {leaf: {tags: _x}, late: {tags: _y}}}\n")


@pytest.mark.parametrize(("cmx_tags", "cm_tags"), [("cm,adr-top", "adrtop"), ("cm,adr-top,pick", "adrtop,_pick")])
def test_add_deps_recursive_reaches_the_deps_of_deps_as_in_cm(cmx_tags: str, cm_tags: str, cm_venv: Path,
                                                              tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """The same hand-written scripts in CM's local repo and imported into cmx: with ``_pick``
    both run adr-mid's dep with ``_x`` and its post dep with ``_y``; without it, as written."""
    root = tmp_path / "cm-repos" / "repos" / "local" / "script"
    _adr_collection(root)
    reference = cm_run(cm_venv, cm_tags, tmp_path)
    out = tmp_path / "recipes"
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert not [i for i in report["issues"] if i["kind"] != "ignored"], report["issues"]
    got = outputs(cmx_cli("run", "recipe", f"--tags={cmx_tags}", "--recipes", str(out), "--json", cwd=tmp_path))
    assert got["new_env"] == reference["new_env"]
    assert got["new_state"] == reference["new_state"]
    seen = "x" if "pick" in cmx_tags else "plain"
    assert got["new_env"]["CM_LEAF_SEEN"] == seen and got["new_env"]["CM_LATE_SEEN"] == seen.replace("x", "y")


ACCESS_CALLER = """
import cmind

def preprocess(i):
    env = i['env']
    r = cmind.access({'action': 'search', 'automation': 'script', 'tags': 'acchelper'})
    env['CM_CALLER_FOUND'] = ','.join(a.path.split('/')[-1] for a in r['list'])
    r = i['automation'].cmind.access({'action': 'run', 'automation': 'script', 'tags': 'acchelper,_loud',
                                      'word': 'hello', 'env': {'CM_HELPER_EXTRA': 'from-env'}, 'quiet': True})
    if r['return'] > 0:
        return r
    env['CM_CALLER_GOT'] = r['new_env']['CM_HELPER_SAID']
    r = cmind.access({'action': 'system', 'automation': 'utils', 'cmd': 'echo from-sh; exit 3'})
    env['CM_CALLER_SYSTEM'] = r['std'] + ':' + str(r['ret'])
    return {'return': 0}
"""


def test_a_script_that_finds_and_runs_another_through_access_as_in_cm(cm_venv: Path, tmp_path: Path,
                                                                       cmx_cli: Callable[..., Any]) -> None:
    """``cmind.access`` search, run (with an input, a variation and env) and system from a
    ``customize.py``: the same scripts in CM's local repo and through the bridge give the same
    ``new_env``."""
    root = tmp_path / "cm-repos" / "repos" / "local" / "script"
    write_script(root, "acc-helper", f"alias: acc-helper\n{SCRIPT_HEAD.format(uid='d4' * 8)}tags: [acchelper]\n"
                                     "new_env_keys: [CM_HELPER_*]\ninput_mapping: {word: CM_HELPER_WORD}\n"
                                     "variations: {loud: {env: {CM_HELPER_LOUD: 'yes'}}}\n",
                 run_sh='echo "CM_HELPER_SAID=${CM_HELPER_WORD}-${CM_HELPER_LOUD:-no}-${CM_HELPER_EXTRA}" '
                        "> tmp-run-env.out\n")
    write_script(root, "acc-caller", f"alias: acc-caller\n{SCRIPT_HEAD.format(uid='e5' * 8)}tags: [acccaller]\n"
                                     "new_env_keys: [CM_CALLER_*]\n", customize=ACCESS_CALLER)
    reference = cm_run(cm_venv, "acccaller", tmp_path)
    out = tmp_path / "recipes"
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,acc-caller", "--recipes", str(out), "--json", cwd=tmp_path))
    assert got["new_env"] == reference["new_env"]
    assert got["new_env"] == {"CM_CALLER_FOUND": "acc-helper", "CM_CALLER_GOT": "hello-yes-from-env",
                              "CM_CALLER_SYSTEM": ":768"}  # CM's " > FILE" takes only "exit 3"


def test_the_served_actions_and_the_scripts_they_unlock_are_as_the_docs_say(cm_venv: Path) -> None:
    """docs/cm-bridge.md's table of ``cmind.access`` actions: its counts are the collection's."""
    from cmx_cm.access_scan import scan, served  # type: ignore[import-untyped, unused-ignore]  # cmx_cm has no py.typed

    calls = scan(cm_collection(cm_venv))
    doc = (Path(__file__).resolve().parents[3] / "docs" / "cm-bridge.md").read_text()
    section = doc.split("## `cmind.access(...)` from a `customize.py`", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in section.splitlines()
            if line.startswith("| `")}
    count = {pair: sum(pair in c for c in calls.values()) for pair in SERVED}
    for label, told in rows.items():
        pairs = [(words[0], words[-1]) for words in (p.strip("` ").split(" ") for p in label.split(","))]
        assert told == ", ".join(str(count[pair]) for pair in pairs), label
    assert set(rows) and {p for label in rows for p in label.replace("`", "").split(", ")} == \
        {f"{a} {b}" for a, b in SERVED}
    unlocked = sorted(name for name, c in calls.items() if served(c))
    assert f"Of the {len(calls)} scripts whose" in section and f"**{len(unlocked)} call only served" in section
    assert {"install-cmake-prebuilt", "install-llvm-prebuilt", "get-sys-utils-min"} <= set(unlocked)


def test_a_version_miss_that_falls_to_an_install_asks_for_the_same_version_as_cm(
        cm_venv: Path, cm_repos: Path, imported: Path, tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """get-cmake with --version_min=99: every cmake found is skipped, and its prehook dep
    install-cmake-prebuilt (``reuse_version``) is handed the constraint, so its default version
    3.28.3 is raised to 99 as CM raises it. Both then fail on the same download (no network
    here; a 404 where there is one), and cmx's one line also says what was skipped."""
    script = tmp_path / "version_miss.py"
    script.write_text(VERSION_MISS)
    shutil.copytree(cm_repos, tmp_path / "cm-repos", symlinks=True)
    done = subprocess.run([str(cm_venv / "bin" / "python"), str(script), "get,cmake"], cwd=tmp_path,
                          env={**os.environ, "CM_REPOS": str(tmp_path / "cm-repos")}, capture_output=True,
                          text=True, timeout=600, check=False)
    reference = json.loads(done.stdout.strip().splitlines()[-1])
    wanted = "/v99.0.0/cmake-99.0.0-linux-"
    assert reference["return"] == 1 and wanted in reference["error"], reference
    proc = cmx_cli("cm", "run", "script", "--tags=get,cmake", "--recipes", str(imported), "--version_min=99",
                   cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [error] = [line for line in proc.stderr.splitlines() if line.startswith("cmx: error:")]
    assert wanted in error and "download of https://github.com/Kitware/CMake/releases" in error
    if shutil.which("cmake"):
        assert "SKIPPED due to version constraints version_min=99; then prehook_deps install_cmake_prebuilt" in error


INSTEAD_MAIN = """
def preprocess(i):
    i['env']['CM_MAIN_SET'] = 'from-main'
    return {'return': 0, 'skip': True, 'script': {'tags': 'insthelper'}}
"""


def test_a_preprocess_that_names_another_script_runs_it_instead_as_in_cm(cm_venv: Path, tmp_path: Path,
                                                                         cmx_cli: Callable[..., Any]) -> None:
    """``preprocess`` returns ``skip`` with ``script: {tags}``: CM runs that script instead, with
    this one's env, and returns its result; so does the bridge."""
    root = tmp_path / "cm-repos" / "repos" / "local" / "script"
    write_script(root, "inst-helper", f"alias: inst-helper\n{SCRIPT_HEAD.format(uid='f6' * 8)}tags: [insthelper]\n"
                                      "new_env_keys: [CM_HELPER_*]\n",
                 run_sh='echo "CM_HELPER_SAID=${CM_MAIN_SET:-unset}" > tmp-run-env.out\n')
    write_script(root, "inst-main", f"alias: inst-main\n{SCRIPT_HEAD.format(uid='a7' * 8)}tags: [instmain]\n"
                                    "new_env_keys: [CM_MAIN_*]\n", customize=INSTEAD_MAIN,
                 run_sh='echo "CM_MAIN_RAN=yes" > tmp-run-env.out\n')
    reference = cm_run(cm_venv, "instmain", tmp_path)
    out = tmp_path / "recipes"
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,inst-main", "--recipes", str(out), "--json", cwd=tmp_path))
    assert got["new_env"] == reference["new_env"] == {"CM_HELPER_SAID": "from-main"}
    assert [d["kind"] for d in got["lifecycle"]] == ["instead"]


def test_the_docs_count_the_cases_compared_with_cm() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "cm-bridge.md").read_text()
    bullet = doc.split(f"* {len(SCRIPTS)} offline cases ({len(CASES)} scripts, with their variations)", 1)
    assert len(bullet) == 2, "the bullet must state the cases and the distinct scripts compared"
    bullet_text = bullet[1].split("\n* ", 1)[0]
    assert f"all {len(SCRIPTS)} succeeding" in bullet_text
    returning = len(CASES) - len(EMPTY)
    assert f"{returning} of the {len(CASES)} scripts return" in bullet_text
    assert all(f"`{alias}`" in bullet_text for alias in CASES), [a for a in CASES if f"`{a}`" not in bullet_text]
    assert sum(len(cases) for cases in CASES.values()) == len(SCRIPTS) and EMPTY.issubset(CASES)  # no tags twice
    assert len(CASES) >= 40  # issue 48: at least 40 distinct scripts of the collection compared key by key



PRECEDENCE_CALLERS = (("envp-top", "deps", "envpleaf,_v"), ("envp-top-e", "deps", "envpleaf,_v,_e"),
                      ("envp-late", "post_deps", "envpleaf,_v"))
"""envp-leaf's callers: a planned dep with ``_v``, one with ``_v,_e``, and a post dep (run time)."""


@pytest.mark.parametrize("alias", ["envp-top", "envp-top-e", "envp-late"])
def test_a_callers_env_yields_to_the_scripts_own_env_as_in_cm(alias: str, cm_venv: Path, tmp_path: Path,
                                                              cmx_cli: Callable[..., Any]) -> None:
    """CM sets a script's own ``env`` and its selected variations' ``env`` (a group's default
    included) over the env its caller passes; only ``default_env`` keys and undeclared ones
    take the caller's value. The same through a planned dep and a run-time one."""
    root = tmp_path / "cm-repos" / "repos" / "local" / "script"
    precedence_scripts(root, "CM", SCRIPT_HEAD, PRECEDENCE_CALLERS)
    reference = cm_run(cm_venv, alias.replace("-", ""), tmp_path)
    out = tmp_path / "recipes"
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    got = outputs(cmx_cli("run", "recipe", f"--tags=cm,{alias}", "--recipes", str(out), "--json", cwd=tmp_path))
    assert got["new_env"] == reference["new_env"]
    group = "caller" if alias == "envp-top-e" else "d"
    assert got["new_env"] == {"CM_ENVP_SEEN_META": "meta", "CM_ENVP_SEEN_VAR": "variation", "CM_ENVP_SEEN_GROUP": group,
                              "CM_ENVP_SEEN_DEFAULT": "caller", "CM_ENVP_SEEN_FREE": "caller"}


def test_the_users_env_yields_to_the_scripts_own_env_as_in_cm(cm_venv: Path, tmp_path: Path,
                                                              cmx_cli: Callable[..., Any]) -> None:
    """``--env.KEY=VALUE`` on CM's command line (``cmx cm run script``) is a caller's env too."""
    root = tmp_path / "cm-repos" / "repos" / "local" / "script"
    precedence_scripts(root, "CM", SCRIPT_HEAD, PRECEDENCE_CALLERS)
    env = {f"CM_ENVP_{k}": "user" for k in ENVP_KEYS}
    reference = cm_run(cm_venv, "envpleaf,_v", tmp_path, env=env)
    out = tmp_path / "recipes"
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    got = outputs(cmx_cli("cm", "run", "script", "--tags=envpleaf,_v", "--recipes", str(out), "--json",
                          *(f"--env.{k}={v}" for k, v in env.items()), cwd=tmp_path))
    assert got["new_env"] == reference["new_env"]
    assert got["new_env"]["CM_ENVP_SEEN_META"] == "meta" and got["new_env"]["CM_ENVP_SEEN_FREE"] == "user"
