"""Dep selection over a whole collection (cmx_cm.index): the script CM would pick is pinned,
a dep's env becomes its recipe's inputs, a post_dep that depends back runs after the script, and a
script may depend on itself with another variation."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cm_helpers import outputs, write_script

from cmx_cm.collection import import_collection
from cmx_cm.index import DepQuery, split_tags
from cmx_core import api
from cmx_core.errors import CmxError


def _selection_collection(root: Path) -> None:
    write_script(root, "get-python3", "alias: get-python3\ntags: [get, python, python3]\n")
    write_script(root, "get-dataset", "alias: get-dataset\ntags: [get, dataset]\nvariations: {python: {}}\n")
    write_script(root, "get-gcc", "alias: get-gcc\nsort: 500\ntags: [get, compiler, gcc]\n")
    write_script(root, "get-llvm", "alias: get-llvm\nsort: 100\ntags: [get, compiler, llvm]\n")
    write_script(root, "user", """
        alias: user
        tags: [user]
        deps:
          - {tags: 'get,python'}
          - {tags: 'get,compiler', names: [compiler]}
          - {tags: 'get,compiler,-llvm', names: [not_llvm]}
          - {tags: 'get,nothing-has-this'}
        """)


def test_split_tags_as_cm_does() -> None:
    assert split_tags(["get", "python3", "_pip", "-tmp", "-_cuda"]) == DepQuery(("get", "python3"), ("pip",),
                                                                                ("tmp",), ("cuda",))


def test_dep_pinned_to_the_script_cm_selects(tmp_path: Path, cmx_home: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    _selection_collection(root)
    result = import_collection(root, out)
    user = next(t for t in result.translations if t.name == "cm.user")
    deps = {d["as"]: d["tags"] for d in user.recipe["deps"]}
    assert deps["get_python"] == ["cm", "get", "python", "get-python3"]  # not get-dataset's 'python' variation
    assert deps["compiler"] == ["cm", "get", "compiler", "get-llvm"]  # the lowest sort, as CM's quiet mode
    assert deps["not_llvm"] == ["cm", "get", "compiler", "get-gcc"]  # exclusion honoured at selection
    keys = {i.key: i for i in user.issues}
    assert keys["deps[1].tags"].kind == "approximated" and "pinned to get-llvm" in keys["deps[1].tags"].reason
    assert "no script of the collection" in keys["deps[3].tags"].reason
    assert "deps[2].tags" not in keys  # the exclusion was honoured, nothing approximated
    with pytest.raises(CmxError, match="nothing-has-this"):  # no script has it: CM fails the same way
        api.plan(["cm", "user"], recipes_dirs=[out])


def test_dep_env_becomes_inputs_of_its_recipe(tmp_path: Path, cmx_home: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "get-repo", """
        alias: get-repo
        tags: [get, repo]
        default_env: {CM_GIT_CHECKOUT: main}
        input_mapping: {depth: CM_GIT_DEPTH}
        """)
    write_script(root, "caller", """
        alias: caller
        tags: [caller]
        deps:
          - tags: get,repo
            env: {CM_GIT_CHECKOUT: 'v{{CM_V}}', CM_GIT_DEPTH: '1', CM_UNKNOWN: x, CM_FROM_PARENT: '<<<CM_X>>>'}
        """)
    result = import_collection(root, out)
    caller = next(t for t in result.translations if t.name == "cm.caller")
    # CM_UNKNOWN is not in get-repo's metadata, but a dependent passes it: get-repo gets an input for it
    assert caller.recipe["deps"][0]["with"] == {"cm_git_checkout": "{% raw %}v{{CM_V}}{% endraw %}", "depth": "1",
                                                "cm_unknown": "x"}
    repo_recipe = next(t for t in result.translations if t.name == "cm.get-repo").recipe
    assert "cm_unknown" in repo_recipe["inputs"] and "default" not in repo_recipe["inputs"]["cm_unknown"]
    reasons = {i.key: i.reason for i in caller.issues}
    assert "filled in from the parent" in reasons["deps[0].env.CM_FROM_PARENT"]
    plan = api.plan(["cm", "caller"], recipes_dirs=[out])
    repo = next(n for n in plan.nodes if n.recipe.name == "cm.get-repo")
    assert repo.inputs["cm_git_checkout"] == "v{{CM_V}}"  # CM fills {{KEY}} itself: cmx passes it verbatim
    assert repo.inputs["cm_unknown"] == "x"


def test_post_dep_depending_back_runs_after_the_script(tmp_path: Path, cmx_home: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "get-cc", "alias: get-cc\ntags: [get, cc]\npost_deps: [{tags: 'get,cc-flags'}]\n")
    write_script(root, "get-cc-flags", """
        alias: get-cc-flags
        tags: [get, cc-flags]
        deps: [{tags: 'get,cc', skip_if_env: {CM_CC_BIN: ['on']}}]
        """)
    result = import_collection(root, out)
    cc = next(t for t in result.translations if t.name == "cm.get-cc")
    assert "deps" not in cc.recipe  # a post dep runs after the script (test_cm_lifecycle.py runs it)
    hooks = cc.recipe["steps"][0]["with"]["hooks"]
    assert [(h["kind"], h["target"]) for h in hooks] == [("post_deps", "get-cc-flags")]
    assert not [i for i in cc.issues if i.key == "post_deps[0]"]
    # get-cc-flags' skip condition reads CM_CC_BIN, set at run time: decided then, not planned
    assert [n.recipe.name for n in api.plan(["cm", "get", "cc-flags"], recipes_dirs=[out]).nodes] == \
        ["cm.get-cc-flags"]


def test_self_dep_with_another_variation_plans(tmp_path: Path, cmx_home: Path) -> None:
    """CM's get-generic-python-lib: ``_package.x`` depends on the same script with ``_pip``,
    skipped when the package is pip. Needs the resolver keying cycles by recipe, variations
    and inputs (commit 64a0ccc)."""
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "get-lib", """
        alias: get-lib
        tags: [get, lib]
        deps:
          - tags: get,lib,_pip
            names: [pip]
            skip_if_env: {CM_LIB_NAME: [pip]}
        variations:
          pip: {env: {CM_LIB_NAME: pip}}
          package.#: {env: {CM_LIB_NAME: '#'}}
        """)
    result = import_collection(root, out)
    lib = result.translations[0]
    assert lib.recipe["deps"][0]["tags"] == ["cm", "get", "lib", "get-lib", "pip"]
    plan = api.plan(["cm", "get", "lib", "package.numpy"], recipes_dirs=[out])
    assert [(n.recipe.name, n.inputs["cm_lib_name"]) for n in plan.nodes] == [("cm.get-lib", "pip"),
                                                                              ("cm.get-lib", "numpy")]


def test_live_path_retranslates_when_the_index_changes(tmp_path: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    _selection_collection(root)
    import_collection(root, out, reuse=True)
    assert import_collection(root, out, reuse=True).reused == 5  # nothing changed: nothing parsed
    (root / "get-gcc" / "_cm.yaml").write_text("alias: get-gcc\nsort: 1\ntags: [get, compiler, gcc]\n")
    again = import_collection(root, out, reuse=True)
    assert again.reused == 0  # the selection data changed: every dep is chosen anew
    stamps = json.loads((out / "stamps.json").read_text())
    assert stamps["format"] == 3 and stamps["index"]
    user = (out / "cm.user.yaml").read_text()
    assert "- get-gcc\n  as: compiler" in user


def test_variation_changes_or_replaces_a_dep_by_name(tmp_path: Path, cmx_home: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "get-py", "alias: get-py\ntags: [get, py]\nvariations: {v2: {}}\n")
    write_script(root, "get-other", "alias: get-other\ntags: [get, other]\n")
    write_script(root, "app", """
        alias: app
        tags: [app]
        deps:
          - {tags: 'get,py', names: [python]}
        variations:
          newer: {ad: {python: {tags: _v2, version_min: '3.8'}, nothing: {tags: x}}, adr: {python: {tags: _v2}}}
          swap: {deps: [{tags: 'get,other', names: [python]}]}
        """)
    result = import_collection(root, out)
    app = next(t for t in result.translations if t.name == "cm.app")
    assert app.recipe["deps"][0]["when"] == ("('|python:' not in inputs.cm_adr) and not ('newer' in variations or "
                                             "'swap' in variations)")  # callers pass no adr for 'python' either
    newer = app.recipe["variations"]["newer"]["deps"][0]
    assert newer["tags"] == ["cm", "get", "py", "get-py", "v2"] and newer["with"] == {"version_min": "3.8"}
    assert any(i.key == "variations.newer.ad.nothing" for i in app.issues)
    # adr is applied to the own dep like ad (one changed copy) and handed down the tree, as in CM
    assert not any(i.key == "variations.newer.adr" for i in app.issues)
    assert len(app.recipe["variations"]["newer"]["deps"]) == 1
    assert "with" not in app.recipe["deps"][0]  # get-py has no deps for an adr to change: nothing to hand down

    def chosen(*tags: str) -> list[str]:
        return [n.recipe.name for n in api.plan(["cm", "app", *tags], recipes_dirs=[out]).nodes]

    assert chosen() == ["cm.get-py", "cm.app"]
    assert chosen("swap") == ["cm.get-other", "cm.app"]  # replaced, as CM's append_deps does
    plan = api.plan(["cm", "app", "newer"], recipes_dirs=[out])
    assert [(n.recipe.name, sorted(n.variations)) for n in plan.nodes] == [("cm.get-py", ["v2"]), ("cm.app", ["newer"])]


def test_add_deps_recursive_changes_the_scripts_own_deps(tmp_path: Path, cmx_home: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "get-cc", "alias: get-cc\ntags: [get, cc]\nvariations: {llvm: {}, gcc: {}}\n")
    write_script(root, "app", """
        alias: app
        tags: [app]
        deps: [{tags: 'get,cc', names: [compiler]}]
        variations:
          with-llvm: {adr: {compiler: {tags: _llvm}}}
          with-gcc: {add_deps_recursive: {compiler: {tags: _gcc}, absent: {tags: _x}}}
        """)
    result = import_collection(root, out)
    app = next(t for t in result.translations if t.name == "cm.app")
    kinds = {i.key: i.kind for i in app.issues}
    assert "variations.with-llvm.adr" not in kinds  # handed down the tree as in CM (test_cm_vs_cm.py)
    assert "variations.with-gcc.add_deps_recursive.absent" not in kinds  # down the tree in CM: not an error
    for variation, wanted in (("with-llvm", "llvm"), ("with-gcc", "gcc"), (None, None)):
        plan = api.plan(["cm", "app", *([variation] if variation else [])], recipes_dirs=[out])
        cc = next(n for n in plan.nodes if n.recipe.name == "cm.get-cc")
        assert list(cc.variations) == ([wanted] if wanted else [])


def _compilers(root: Path) -> None:
    """get-llvm sorts first; get-gcc is the one a warm CM has in its cache."""
    for alias, sort in (("get-llvm", 100), ("get-gcc", 500)):
        write_script(root, alias, f"alias: {alias}\nsort: {sort}\ncache: true\ntags: [get, compiler]\n"
                                  "new_env_keys: [CM_COMPILER_NAME]\n",
                     run_sh=f'echo "CM_COMPILER_NAME={alias}" > tmp-run-env.out\n')
    write_script(root, "flags", "alias: flags\ntags: [flags]\ndeps: [{tags: 'get,compiler'}]\n")
    write_script(root, "flags-late", """
        alias: flags-late
        tags: [flags-late]
        new_env_keys: [CM_COMPILER_NAME]
        deps: [{tags: 'get,compiler', skip_if_env: {CM_C_COMPILER_BIN: ['on']}}]
        """)


def test_a_dep_that_matches_several_takes_the_cached_one_as_cm(tmp_path: Path,
                                                               cmx_cli: Callable[..., Any]) -> None:
    """CM's rule, planned (``flags``: a plain dep) and at run time (``flags-late``: a dep whose
    condition reads the env then): the lowest sort while neither is cached, then the cached
    get-gcc, then the lowest sort again once its entry is gone."""
    root, out = tmp_path / "c", tmp_path / "out"
    _compilers(root)
    result = import_collection(root, out)
    flags = next(t for t in result.translations if t.name == "cm.flags").recipe
    assert flags["deps"][0]["cached_alternatives"] == [["cm", "get", "compiler", "get-gcc"]]
    late = next(t for t in result.translations if t.name == "cm.flags-late").recipe
    assert late["steps"][0]["with"]["hooks"][0]["targets"] == ["get-llvm", "get-gcc"]

    def compiler() -> tuple[list[str], str]:
        planned = [n.recipe.name for n in api.plan(["cm", "flags"], recipes_dirs=[out]).nodes]
        got = outputs(cmx_cli("run", "recipe", "--tags=cm,flags-late", "--recipes", str(out), "--json"))
        return planned, got["lifecycle"][0]["recipe"]

    assert compiler() == (["cm.get-llvm", "cm.flags"], "get-llvm")
    assert cmx_cli("cache", "rm", "--recipe", "cm.get-llvm").returncode == 0  # the run-time dep cached it
    outputs(cmx_cli("run", "recipe", "--tags=cm,get-gcc", "--recipes", str(out), "--json"))
    assert compiler() == (["cm.get-gcc", "cm.flags"], "get-gcc")
    assert cmx_cli("cache", "rm", "--recipe", "cm.get-gcc").returncode == 0
    assert compiler() == (["cm.get-llvm", "cm.flags"], "get-llvm")


REMEMBERED = "handed over as remembered"


def test_a_single_match_is_handed_over_as_remembered_until_the_collection_changes(
        tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """``cmx cm run script`` with one match remembers its hand-over: the next identical command
    goes straight to ``cmx run recipe`` (no plugin loads to choose again) and gives the same
    result; a re-import that changes the index, and a memo edited by hand, are not followed;
    a choice among several matches (it reads the cache) is never remembered."""
    root, out = tmp_path / "c", tmp_path / "out"
    write_script(root, "say", "alias: say\ntags: [say, word]\nnew_env_keys: [CM_SAID]\n",
                 run_sh='echo "CM_SAID=one" > tmp-run-env.out\n')
    _compilers(root)
    import_collection(root, out)
    command = ("cm", "run", "script", "--tags=say,word", "--recipes", str(out), "--json", "-v")

    def said() -> tuple[str, str]:
        proc = cmx_cli(*command)
        return outputs(proc)["new_env"]["CM_SAID"], proc.stderr

    first, second = said(), said()
    assert REMEMBERED not in first[1] and REMEMBERED in second[1]
    assert first[0] == second[0] == "one"
    off = cmx_cli(*command, env={"CMX_NO_REPLAY": "1"})
    assert off.returncode == 0 and REMEMBERED not in off.stderr

    (root / "say" / "run.sh").write_text('#!/bin/bash\necho "CM_SAID=two" > tmp-run-env.out\n')
    import_collection(root, out)
    third = said()
    assert REMEMBERED not in third[1] and third[0] == "two"

    memos = list((Path(os.environ["CMX_HOME"]) / "cache" / "handover" / "cm").glob("*.json"))
    assert len(memos) == 1
    signature, body = memos[0].read_text().split("\n", 1)
    memo = json.loads(body)
    memo["to"] = [*memo["to"][:1], "recipe", "--tags=cm,get-llvm", *memo["to"][3:]]
    memos[0].write_text(signature + "\n" + json.dumps(memo))
    forged = said()
    assert REMEMBERED not in forged[1] and forged[0] == "two"
    assert REMEMBERED in said()[1]
    assert cmx_cli("cache", "prune").returncode == 0 and len(list(memos[0].parent.glob("*.json"))) == 1  # it holds
    import_collection(root, out)
    assert cmx_cli("cache", "prune").returncode == 0 and not list(memos[0].parent.glob("*.json"))  # it no longer did

    several = ("cm", "run", "script", "--tags=get,compiler", "--recipes", str(out), "--json", "-v")
    runs = [cmx_cli(*several) for _ in range(2)]
    assert all(r.returncode == 0 and "match 2 scripts" in r.stderr and REMEMBERED not in r.stderr for r in runs)
