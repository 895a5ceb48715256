"""CM's ``cmind.access(...)`` actions from a ``customize.py`` through the bridge (issue 48):
a file downloaded from a local ``file://`` URL and unzipped, a shell command's output, another
script of the collection found and run with inputs and env; what is not served, a hostile
archive and a failed download are one line each, with nothing half-written."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cm_helpers import outputs, write_script

from cmx_cm.actions import SERVED
from cmx_cm.collection import import_collection

FETCHER = """
import os
import cmind

def preprocess(i):
    env = i['env']
    cm = i['automation'].cmind
    r = cm.access({'action': 'download_file', 'automation': 'utils,dc2743f8450541e3', 'url': env['CM_FETCH_URL'],
                   'verify': 'no'})
    if r['return'] > 0:
        return r
    env['CM_FETCH_SIZE'] = str(r['size'])
    env['CM_FETCH_NAME'] = r['filename']
    r = cmind.access({'action': 'unzip_file', 'automation': 'utils', 'filename': r['path'], 'strip_folders': 1,
                      'path': 'unpacked'})
    if r['return'] > 0:
        return r
    env['CM_FETCH_TEXT'] = open(os.path.join('unpacked', 'data', 'hello.txt')).read().strip()
    r = cmind.access({'action': 'system', 'automation': 'utils', 'cmd': '(echo said-by-sh; exit 3)',
                      'stdout': 'sys.out'})
    env['CM_FETCH_SYSTEM'] = r['stdout'] + ':' + str(r['ret']) + ':' + open('sys.out').read().strip()
    return {'return': 0}
"""

CALLER = """
import cmind

def preprocess(i):
    env = i['env']
    r = cmind.access({'action': 'search', 'automation': 'script', 'tags': 'helper'})
    env['CM_CALLER_FOUND'] = ','.join(a.alias for a in r['list'])
    r = cmind.access({'action': 'run', 'automation': 'script', 'tags': 'helper,_loud', 'word': 'hello',
                      'env': {'CM_HELPER_EXTRA': 'from-env'}, 'quiet': True})
    if r['return'] > 0:
        return r
    env['CM_CALLER_GOT'] = r['new_env']['CM_HELPER_SAID']
    return {'return': 0}
"""

UNSERVED = """
import cmind

def preprocess(i):
    return cmind.access({'action': 'rm', 'automation': 'cache', 'tags': 'x', 'force': True})
"""


def _collection(root: Path) -> None:
    write_script(root, "fetcher", "alias: fetcher\ntags: [fetcher]\nnew_env_keys: [CM_FETCH_*]\n"
                                  "input_mapping: {url: CM_FETCH_URL}\n", customize=FETCHER)
    write_script(root, "helper", "alias: helper\ntags: [helper]\nnew_env_keys: [CM_HELPER_*]\n"
                                 "input_mapping: {word: CM_HELPER_WORD}\n"
                                 "variations: {loud: {env: {CM_HELPER_LOUD: 'yes'}}}\n",
                 run_sh='echo "CM_HELPER_SAID=${CM_HELPER_WORD}-${CM_HELPER_LOUD:-no}-${CM_HELPER_EXTRA}" '
                        "> tmp-run-env.out\n")
    write_script(root, "caller", "alias: caller\ntags: [caller]\nnew_env_keys: [CM_CALLER_*]\n", customize=CALLER)
    write_script(root, "unserved", "alias: unserved\ntags: [unserved]\n", customize=UNSERVED)


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    root, out = tmp_path / "c" / "script", tmp_path / "recipes"
    _collection(root)
    import_collection(root, out)
    return out


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def test_download_unzip_and_system_from_a_file_url(recipes: Path, tmp_path: Path,
                                                   cmx_cli: Callable[..., Any]) -> None:
    archive = _zip(tmp_path / "pack.zip", {"top/data/hello.txt": "hello from a zip\n"})
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,fetcher", "--recipes", str(recipes),
                          f"--url={archive.as_uri()}", "--json"))
    env = got["new_env"]
    assert env["CM_FETCH_NAME"] == "pack.zip" and env["CM_FETCH_SIZE"] == str(archive.stat().st_size)
    assert env["CM_FETCH_TEXT"] == "hello from a zip"  # strip_folders=1 dropped "top/"
    assert env["CM_FETCH_SYSTEM"] == "said-by-sh:768:said-by-sh"  # returned and in the file; ret is 3 x 256


def test_a_script_finds_and_runs_another_with_inputs_variations_and_env(recipes: Path,
                                                                       cmx_cli: Callable[..., Any]) -> None:
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,caller", "--recipes", str(recipes), "--json"))
    assert got["new_env"] == {"CM_CALLER_FOUND": "helper", "CM_CALLER_GOT": "hello-yes-from-env"}


def test_an_action_not_served_is_one_line_naming_it(recipes: Path, cmx_cli: Callable[..., Any]) -> None:
    proc = cmx_cli("run", "recipe", "--tags=cm,unserved", "--recipes", str(recipes))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [error] = [line for line in proc.stderr.splitlines() if line.startswith("cmx: error:")]
    assert "cmind.access({'action': 'rm', 'automation': 'cache'}) is not available under cmx-cm" in error
    assert all(f"{a} {b}" in error for a, b in SERVED)


def test_a_missing_url_fails_in_one_line_and_leaves_no_part(recipes: Path, tmp_path: Path,
                                                            cmx_cli: Callable[..., Any]) -> None:
    missing = (tmp_path / "absent.zip").as_uri()
    proc = cmx_cli("run", "recipe", "--tags=cm,fetcher", "--recipes", str(recipes), f"--url={missing}", "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"download of {missing} failed" in proc.stderr
    assert not list(Path(tmp_path).rglob("*.cmx-part")) and not list(Path(tmp_path).rglob("absent.zip"))


def test_an_archive_member_outside_the_target_is_refused(recipes: Path, tmp_path: Path,
                                                         cmx_cli: Callable[..., Any]) -> None:
    archive = _zip(tmp_path / "evil.zip", {"top/data/hello.txt": "fine\n", "top/../../../escaped.txt": "no\n"})
    proc = cmx_cli("run", "recipe", "--tags=cm,fetcher", "--recipes", str(recipes), f"--url={archive.as_uri()}",
                   "--json")
    assert proc.returncode == 1 and "would be written outside" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.rglob("escaped.txt"))
    assert json.loads(proc.stdout or "{}").get("status", "error") != "success"


MLC_FETCHER = """
from utils import download_file, unzip_file

def preprocess(i):
    env = i['env']
    assert i['const'] == {} and i['const_state'] == {}  # MLC's get-gcc reads i['const']
    r = download_file({'url': env['MLC_URL'], 'path': '.'})
    if r['return'] > 0:
        return r
    r = unzip_file({'filename': r['path'], 'path': 'out'})
    if r['return'] > 0:
        return r
    env['MLC_FETCH_TEXT'] = open('out/a.txt').read().strip()
    return {'return': 0}
"""


def test_an_mlc_script_downloads_through_utils_and_runs_by_its_mlc_tags(tmp_path: Path,
                                                                        cmx_cli: Callable[..., Any]) -> None:
    """MLC's ``from utils import download_file, unzip_file``, and ``cmx cm run script`` on an MLC
    collection (its recipes are ``mlc.*``, tagged ``mlc``)."""
    root, out = tmp_path / "m" / "script", tmp_path / "recipes"
    write_script(root, "mlc-fetch", "alias: mlc-fetch\ntags: [mlcfetch]\nnew_env_keys: [MLC_FETCH_*]\n"
                                    "input_mapping: {url: MLC_URL}\n", customize=MLC_FETCHER,
                 meta_file="meta.yaml")
    import_collection(root, out)
    archive = _zip(tmp_path / "m.zip", {"a.txt": "from an MLC script\n"})
    got = outputs(cmx_cli("cm", "run", "script", "--tags=mlcfetch", "--recipes", str(out),
                          f"--url={archive.as_uri()}", "--json"))
    assert got["new_env"] == {"MLC_FETCH_TEXT": "from an MLC script"}
