"""The lock-drift refusal says what changed, old -> new: the recipe line, the input, the
fact (the facts a node used are compared too), and a cache key only when nothing else
explains it; ``--allow-drift`` still lets the allowed kind of fact through."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cmx_core
import cmx_core.api

LEAF = ('name: leaf\ntags: [leaf]\nsummary: leaf\nrequires: {os.name: linux}\n'
        'steps: [{uses: shell, with: {cmd: ["true"]}}]\n')
TOP = ("name: top\ntags: [top]\nsummary: top\ninputs: {n: {type: integer, default: 1}}\n"
       "deps: [{tags: [leaf]}]\nsteps: [{uses: shell, with: {cmd: [echo, '{{ inputs.n }}']}}]\n")


def locked_run(recipes: Any) -> Path:
    recipes("leaf", LEAF)
    recipes("top", TOP)
    return Path(cmx_core.api.run("top", {"n": "7"}, recipes_dirs=[recipes.dir]).run_dir) / "lock.json"


def edit_lock(lock: Path, node_id: str, field: str, key: str, value: Any) -> None:
    doc = json.loads(lock.read_text())
    node = next(n for n in doc["nodes"] if n["id"] == node_id)
    node[field][key] = value
    lock.write_text(json.dumps(doc))


def refusal(cli: Callable[..., Any], lock: Path, recipes_dir: Path, *extra: str) -> str:
    result = cli("run", "--lock", lock, "--recipes", recipes_dir, *extra)
    assert result.code == 2, result.err
    lines = [ln for ln in result.err_lines if ln.startswith("cmx: error:")]
    assert len(lines) == 1 and "Traceback" not in result.err, result.err
    return str(lines[0])


def test_a_changed_recipe_line_is_shown_old_to_new(cli: Callable[..., Any], recipes: Any) -> None:
    lock = locked_run(recipes)
    (recipes.dir / "leaf.yaml").write_text(LEAF.replace("summary: leaf", "summary: a changed leaf"))
    line = refusal(cli, lock, recipes.dir)
    assert "node leaf: digest " in line
    assert "leaf.yaml line 3: 'summary: leaf' -> 'summary: a changed leaf'" in line
    # top's own key changes only through its dep's key: listed after the leaf's reason, not before
    assert line.index("node leaf: digest") < line.index("node top: cache_key")


def test_a_changed_input_is_named(cli: Callable[..., Any], recipes: Any) -> None:
    lock = locked_run(recipes)
    edit_lock(lock, "top", "inputs", "n", 8)  # the lock says the query gave 8, the replay resolves 7
    line = refusal(cli, lock, recipes.dir)
    assert "node top: input n: 8 -> 7" in line
    assert "cache_key" not in line  # the input explains the key's change


def test_a_changed_fact_is_named_and_allowed_by_its_class(cli: Callable[..., Any], recipes: Any) -> None:
    lock = locked_run(recipes)
    edit_lock(lock, "leaf", "facts_used", "os.name", "plan9")
    line = refusal(cli, lock, recipes.dir)
    assert 'node leaf: fact os.name: "plan9" -> "linux"' in line
    done = cli("run", "--lock", lock, "--recipes", recipes.dir, "--allow-drift=software", "--json")
    assert done.code == 0, done.err


def test_a_lock_without_recipe_text_still_names_the_file(cli: Callable[..., Any], recipes: Any) -> None:
    lock = locked_run(recipes)
    doc = json.loads(lock.read_text())
    for node in doc["nodes"]:
        node.pop("recipe_text")
    lock.write_text(json.dumps(doc))
    (recipes.dir / "leaf.yaml").write_text(LEAF.replace("summary: leaf", "summary: other"))
    line = refusal(cli, lock, recipes.dir)
    assert "leaf.yaml changed (this lock keeps no recipe text to show the line)" in line


def test_variations_and_step_versions_are_named_and_an_unexplained_key_is_listed() -> None:
    from cmx_core.run.lock import _node_diffs
    from cmx_core.run.lock_records import LockNode

    old = [{"id": "a", "variations": {"cpu": True}, "steps": {"shell": "1"}, "cache_key": "k1"},
           {"id": "b", "cache_key": "k1", "inputs": {"p": "/x"}}]
    new = [{"id": "a", "variations": {"gpu": True}, "steps": {"shell": "2"}, "cache_key": "k2"},
           {"id": "b", "cache_key": "k2", "inputs": {"p": "/x"}}]
    assert _node_diffs([LockNode.from_json(n) for n in old], [LockNode.from_json(n) for n in new]) == [
        "node a: variation cpu: true -> (none)", "node a: variation gpu: (none) -> true",
        "node a: step type shell: \"1\" -> \"2\"", 'node b: cache_key "k1" -> "k2"']


def test_a_lock_read_back_is_the_lock_written_and_keeps_its_digest(recipes: Any, cmx_home: Path) -> None:
    """The typed lock record holds everything ``lock.json`` does: read and written again, it
    is the same document (so a lock's digest in a result's provenance stays what it was)."""
    from cmx_core.datautil import digest
    from cmx_core.run.lock import read_lock

    lock = locked_run(recipes)
    written = json.loads(lock.read_text())
    record = read_lock(lock)
    assert record.to_json() == written and digest(record.to_json()) == digest(written)
    assert record.query.tags == ("top",) and dict(record.query.inputs) == written["query"]["inputs"]
    assert [n.id for n in record.nodes] == [n["id"] for n in written["nodes"]]


def test_a_run_request_refuses_jobs_below_one_when_built() -> None:
    from cmx_core.errors import UsageError
    from cmx_core.run.request import RunRequest

    try:
        RunRequest("demo,sort", jobs=0)
    except UsageError as exc:
        assert str(exc) == "-j must be at least 1, got 0"
    else:
        raise AssertionError("RunRequest(jobs=0) was accepted")


READER = ("name: reader\ntags: [reader]\nsummary: reads a dataset file\n"
          "inputs: {data: {type: path, required: true}}\n"
          "steps: [{uses: shell, with: {cmd: [sh, -c, 'echo v=$(cat \"$1\")', sh, '{{ inputs.data }}'], parse: kv}}]\n"
          "outputs: [v]\n")


def test_a_dataset_edited_in_place_with_its_mtime_restored_fails_the_replay(cli: Callable[..., Any], recipes: Any,
                                                                             tmp_path: Path) -> None:
    """A ``path`` input's key holds its ctime and inode, not only its size and mtime: an edit
    that puts both back is a new key, so the replay is refused and the cache is not served."""
    recipes("reader", READER)
    data = tmp_path / "data.txt"
    data.write_text("one")
    first = cmx_core.api.run("reader", {"data": str(data)}, recipes_dirs=[recipes.dir])
    assert first.document["outputs"]["v"] == "one"
    before = os.stat(data)
    data.write_text("two")  # the same size, the same inode
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(data).st_size, os.stat(data).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    line = refusal(cli, Path(first.run_dir) / "lock.json", recipes.dir)
    assert "node reader: cache_key" in line
    again = cmx_core.api.run("reader", {"data": str(data)}, recipes_dirs=[recipes.dir])
    assert again.document["outputs"]["v"] == "two"  # not the cached "one"
