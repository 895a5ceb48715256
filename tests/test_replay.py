"""The warm-run replay (cmx_core.run.replay): an identical ``cmx run`` whose nodes are all cache
hits is written again from its memo without loading plugins — and anything the outcome
depends on that changed sends it back to the full path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from cmx_core.providers.refs import reference, resolve
from cmx_core.run import replay

REPLAYED = "replayed without loading plugins"
WRITTEN = "warm-run memo"

ECHO = """
name: echo
tags: [echo]
summary: writes its label (cached)
inputs:
  label: {type: string, default: x}
  data: {type: path, description: "a file whose stat is part of the key"}
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo value=$1', sh, "{{ inputs.label }}"], parse: kv, env_allow: [CMX_TEST_ALLOWED]}
outputs:
  value: {}
"""


def _run(cli, *args: str):
    return cli("run", "recipe", *args, "-v")


def _volatile(document: dict) -> dict:
    """A result without what differs between any two runs."""
    return {k: v for k, v in document.items() if k not in ("run_id", "created_at", "timing")}


def _warm(cli, *args: str) -> None:
    """Run until a memo exists: the first run fills the cache, the second writes the memo."""
    first = _run(cli, *args)
    assert first.code == 0, first.err
    second = _run(cli, *args)
    assert second.code == 0 and f"{WRITTEN} " in second.err and "written" in second.err, second.err


def _run_dir(home: Path, run_id: str) -> Path:
    (found,) = (home / "data" / "runs").glob(f"*-{run_id[:8]}")
    return found


def test_identical_run_is_replayed_and_writes_what_the_full_path_writes(cli, monkeypatch, cmx_home) -> None:
    _warm(cli, "--tags=detect,os")
    replayed = _run(cli, "--tags=detect,os", "--json")  # another argv: its own memo
    assert REPLAYED not in replayed.err
    replayed = _run(cli, "--tags=detect,os", "--json")
    assert replayed.code == 0 and REPLAYED not in replayed.err  # --json: nothing on stderr but errors
    doc = json.loads(replayed.out)
    text = _run(cli, "--tags=detect,os")
    assert REPLAYED in text.err and "COMPLETED  detect-os" in text.out
    monkeypatch.setenv("CMX_NO_REPLAY", "1")
    full = _run(cli, "--tags=detect,os", "--json")
    assert REPLAYED not in full.err
    full_doc = json.loads(full.out)
    assert json.dumps(_volatile(doc)) == json.dumps(_volatile(full_doc))  # same keys in the same order
    assert doc["run_id"] != full_doc["run_id"]
    run_dir, full_dir = _run_dir(cmx_home, doc["run_id"]), _run_dir(cmx_home, full_doc["run_id"])
    for name in ("plan.json", "lock.json"):
        assert (run_dir / name).read_text() == (full_dir / name).read_text()
    assert json.loads((run_dir / "result.json").read_text()) == doc


def test_replayed_runs_are_indexed(cli) -> None:
    _warm(cli, "--tags=detect,os")
    assert REPLAYED in _run(cli, "--tags=detect,os").err
    listed = json.loads(cli("results", "list", "--json").out)["runs"]
    assert len(listed) == 3 and len({r["run_id"] for r in listed}) == 3


def _echo_home(cli, recipes, tmp_path: Path, *extra: str) -> tuple[list[str], Path]:
    path = recipes("echo", ECHO)
    data = tmp_path / "data.txt"
    data.write_text("one")
    args = [f"--recipes={recipes.dir}", "--tags=echo", f"--data={data}", *extra]
    _warm(cli, *args)
    assert REPLAYED in _run(cli, *args).err
    return args, path


def _touch_later(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


CHANGES = {
    "a recipe file changed": lambda ctx: ctx["recipe"].write_text(ctx["recipe"].read_text().replace("x}", "y}")),
    "a recipe file was added": lambda ctx: (ctx["recipe"].parent / "other.yaml").write_text(
        "name: other\ntags: [other]\nsummary: another recipe\nsteps: []\n"),
    "a path input changed": lambda ctx: ctx["data"].write_text("two!"),
    "a let-through variable changed": lambda ctx: ctx["monkeypatch"].setenv("CMX_TEST_ALLOWED", "now set"),
    "a fact's cache file was rewritten": lambda ctx: _touch_later(ctx["home"] / "cache" / "facts" / "memory.json"),
    "the cache entry was removed": lambda ctx: [
        __import__("shutil").rmtree(p) for p in (ctx["home"] / "cache" / "entries").glob("*/*")],
    "the memo is corrupt": lambda ctx: [
        p.write_text("{not json") for p in (ctx["home"] / "cache" / "replay").iterdir()],
    "the memo's deadline passed": lambda ctx: [_expire(p) for p in (ctx["home"] / "cache" / "replay").iterdir()],
}


def _load(memo: Path) -> dict:
    return json.loads(memo.read_text().partition("\n")[2])


def _save(memo: Path, data: dict, *, sign: bool = True) -> None:
    """Write a memo as cmx would (signed with this user's key), or forged (``sign=False``)."""
    import hmac

    body = json.dumps(data)
    key = replay.signing_key() if sign else b"not the key"
    memo.write_text(hmac.new(key, body.encode(), "sha256").hexdigest() + "\n" + body)


def _expire(memo: Path) -> None:
    data = _load(memo)
    data["deadline"] = time.time() - 1
    _save(memo, data)


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_change_sends_the_run_down_the_full_path(change, cli, recipes, tmp_path, monkeypatch, cmx_home) -> None:
    args, recipe = _echo_home(cli, recipes, tmp_path)
    CHANGES[change]({"recipe": recipe, "data": tmp_path / "data.txt", "monkeypatch": monkeypatch, "home": cmx_home})
    after = _run(cli, *args)
    assert after.code == 0, after.err
    assert REPLAYED not in after.err
    if change == "a recipe file changed":
        assert json.loads(_run(cli, *args, "--json").out)["outputs"]["value"] == "y"


def test_an_edited_cmx_module_defeats_the_replay(cli, tmp_path, monkeypatch) -> None:
    """An editable checkout keeps its version when its code changes: the memo records the
    source files of the cmx modules the run loaded."""
    import types

    source = tmp_path / "probe.py"
    source.write_text("# loaded by the run\n")
    probe = types.ModuleType("cmx_core._replay_probe")
    probe.__file__ = str(source)
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    _warm(cli, "--tags=detect,os")
    assert REPLAYED in _run(cli, "--tags=detect,os").err
    source.write_text("# edited\n")
    assert REPLAYED not in _run(cli, "--tags=detect,os").err


def test_verbose_says_why_a_memo_was_not_replayed(cli, recipes, tmp_path) -> None:
    args, recipe = _echo_home(cli, recipes, tmp_path)
    _touch_later(recipe)
    assert f"{recipe} changed" in _run(cli, *args).err


def test_a_repointed_recipes_symlink_defeats_the_replay(cli, tmp_path) -> None:
    for name, label in (("a", "A"), ("b", "B")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "echo.yaml").write_text(ECHO.replace("default: x", f"default: {label}").lstrip())
    link = tmp_path / "recipes"
    link.symlink_to(tmp_path / "a")
    data = tmp_path / "data.txt"
    data.write_text("one")
    args = [f"--recipes={link}", "--tags=echo", f"--data={data}", "--json"]
    _warm(cli, *args)
    assert json.loads(_run(cli, *args).out)["outputs"]["value"] == "A"
    link.unlink()
    link.symlink_to(tmp_path / "b")
    after = _run(cli, *args)
    assert json.loads(after.out)["outputs"]["value"] == "B"


def test_strict_plugin_runs_are_replayed_too(cli) -> None:
    _warm(cli, "--tags=detect,os", "--strict-plugins")
    assert REPLAYED in _run(cli, "--tags=detect,os", "--strict-plugins").err


def test_a_deleted_working_directory_means_the_full_path(cli, recipes, tmp_path, monkeypatch) -> None:
    recipes("echo", ECHO)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    data = tmp_path / "data.txt"
    data.write_text("one")
    for _ in range(2):
        result = _run(cli, f"--recipes={recipes.dir}", "--tags=echo", f"--data={data}")
        assert result.code == 0 and REPLAYED not in result.err, result.err


def _change_during_run(monkeypatch, change) -> None:
    """Make ``change()`` happen after the run and before its memo is written (what another
    cmx process could do at that moment)."""
    from cmx_core.run.replay_record import Recorder

    original = Recorder._write

    def write(self, result, session):
        change()
        return original(self, result, session)

    monkeypatch.setattr(Recorder, "_write", write)


def _rewrite_entry_outputs(home: Path) -> None:
    (meta,) = (home / "cache" / "entries").glob("*/*/meta.json")
    data = json.loads(meta.read_text())
    data["outputs"]["value"] = "recomputed elsewhere"
    meta.write_text(json.dumps(data))


def _rewrite_fact_value(home: Path) -> None:
    path = home / "cache" / "facts" / "memory.json"
    data = json.loads(path.read_text())
    data["value"]["available_bytes"] = 12345
    path.write_text(json.dumps(data))


# the read log names the file whose state changed after the run read it
@pytest.mark.parametrize(("change", "why"), [
    (lambda ctx: _rewrite_entry_outputs(ctx["home"]), "meta.json changed while the run went on"),
    (lambda ctx: _touch_later(ctx["recipe"]), "echo.yaml changed while the run went on"),
    (lambda ctx: ctx["data"].write_text("two!"), "data.txt changed while the run went on"),
    (lambda ctx: _rewrite_fact_value(ctx["home"]), "memory.json changed while the run went on"),
])
def test_what_changes_while_the_run_goes_on_prevents_the_memo(cli, recipes, tmp_path, monkeypatch, cmx_home,
                                                             change, why) -> None:
    recipe = recipes("echo", ECHO)
    data = tmp_path / "data.txt"
    data.write_text("one")
    args = [f"--recipes={recipes.dir}", "--tags=echo", f"--data={data}"]
    assert _run(cli, *args).code == 0  # fills the cache
    _change_during_run(monkeypatch, lambda: change({"home": cmx_home, "recipe": recipe, "data": data}))
    second = _run(cli, *args)
    assert second.code == 0 and "no warm-run memo: " in second.err and why in second.err, second.err
    assert not (cmx_home / "cache" / "replay").exists()


def test_a_signing_key_readable_by_others_is_refused(cli, cmx_home) -> None:
    _warm(cli, "--tags=detect,os")
    key = cmx_home / "data" / replay.KEY_FILE
    key.chmod(0o644)
    with pytest.raises(PermissionError, match="not private"):
        replay.signing_key()
    after = _run(cli, "--tags=detect,os")
    assert after.code == 0 and REPLAYED not in after.err
    assert "no warm-run memo: cannot write it" in after.err


def test_memory_fact_rewrite_defeats_a_detect_replay(cli, cmx_home) -> None:
    _warm(cli, "--tags=detect,os")
    assert REPLAYED in _run(cli, "--tags=detect,os").err
    _touch_later(cmx_home / "cache" / "facts" / "memory.json")
    assert REPLAYED not in _run(cli, "--tags=detect,os").err


def _edit_detect_memo(cli, home: Path, fact_name: str, key: str, value: object, *, sign: bool = True) -> list[str]:
    """Warm ``detect,os``, set ``key`` of one fact in its memo; returns the memo's argv."""
    _warm(cli, "--tags=detect,os")
    memo_file = next((home / "cache" / "replay").iterdir())
    memo = _load(memo_file)
    next(f for f in memo["facts"] if f["name"] == fact_name)[key] = value
    _save(memo_file, memo, sign=sign)
    return memo["argv"]


def test_a_changed_fingerprint_is_noticed(cli, cmx_home) -> None:
    # what a kernel upgrade would do to the os fingerprint
    argv = _edit_detect_memo(cli, cmx_home, "os", "fingerprint", "0" * 16)
    assert replay.explain_stale(argv) == "fact os changed"
    assert REPLAYED not in _run(cli, "--tags=detect,os").err


def test_a_memo_not_signed_with_this_users_key_is_ignored(cli, cmx_home) -> None:
    """A memo names functions to call: one planted in a shared cache must not be trusted."""
    argv = _edit_detect_memo(cli, cmx_home, "host", "detect_ref", ["fn", "this_test_would_import_me", "f"],
                             sign=False)
    assert replay.explain_stale(argv) == "no memo"
    assert "this_test_would_import_me" not in sys.modules
    assert REPLAYED not in _run(cli, "--tags=detect,os").err


@pytest.mark.parametrize("damage", [
    {"files": 3}, {"facts": [{"name": "os"}]}, {"recipe": "../../escaped"}, {"recipe": ""},
    {"document": {"run_id": "x"}}, {"plan_json": None},
    {"discovery": None}, {"validators": [{"ref": ["fn", "cmx_core.datautil", "digest"]}]},
])
def test_a_damaged_memo_falls_back_to_the_full_path(cli, cmx_home, damage) -> None:
    _warm(cli, "--tags=detect,os")
    memo_file = next((cmx_home / "cache" / "replay").iterdir())
    _save(memo_file, {**_load(memo_file), **damage})
    runs = len(list((cmx_home / "data" / "runs").iterdir()))
    after = _run(cli, "--tags=detect,os")
    assert after.code == 0 and REPLAYED not in after.err, after.err
    assert len(list((cmx_home / "data" / "runs").iterdir())) == runs + 1  # only the full path's run


def test_an_uncached_fact_is_detected_again(cli, cmx_home, monkeypatch) -> None:
    _warm(cli, "--tags=detect,os")
    memo = _load(next((cmx_home / "cache" / "replay").iterdir()))
    assert any(f["name"] == "host" and "detect_ref" in f for f in memo["facts"])
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "another-host", "6", "#1", "x86_64")))
    assert replay.explain_stale(memo["argv"]) == "fact host changed"


def test_other_arguments_have_their_own_memo(cli, recipes, tmp_path) -> None:
    args, _ = _echo_home(cli, recipes, tmp_path)
    assert REPLAYED not in _run(cli, *args, "--label=z").err


@pytest.mark.parametrize("extra", [["--no-cache"], ["--refresh"]])
def test_runs_that_bypass_the_cache_leave_no_memo(cli, recipes, tmp_path, extra, cmx_home) -> None:
    recipes("echo", ECHO)
    args = [f"--recipes={recipes.dir}", "--tags=echo", *extra]
    for _ in range(3):
        result = _run(cli, *args)
        assert result.code == 0 and REPLAYED not in result.err
    assert not (cmx_home / "cache" / "replay").exists()


def test_a_run_that_computed_something_leaves_no_memo(cli, recipes) -> None:
    recipes("echo", ECHO)
    first = _run(cli, f"--recipes={recipes.dir}", "--tags=echo")
    assert "no warm-run memo: not every node was a cache hit" in first.err


def test_a_facts_file_leaves_no_memo(cli, tmp_path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"facts": {"os": {"name": "linux"}, "cpu": {}, "memory": {}, "python": {}}}))
    for _ in range(3):
        result = _run(cli, "--tags=detect,os", f"--facts={facts}")
        assert result.code == 0 and REPLAYED not in result.err, result.err


def test_a_third_party_event_observer_prevents_the_memo() -> None:
    from cmx_core.plugins.hookspecs import hookimpl
    from cmx_core.plugins.loader import load_registry
    from cmx_core.run.replay_record import NotReplayable, _check_events

    class Observer:
        @hookimpl
        def cmx_result_written(self, path, document) -> None:
            pass

    registry = load_registry(extra=[("observer", Observer())])
    assert not registry.from_entry_points
    session = type("S", (), {"registry": registry})()
    with pytest.raises(NotReplayable, match="observer observes cmx_result_written"):
        _check_events(session)


def test_cache_prune_drops_expired_and_unreadable_memos(cli, recipes, tmp_path, cmx_home) -> None:
    _echo_home(cli, recipes, tmp_path)
    _echo_home(cli, recipes, tmp_path, "--label=other")
    memos = sorted((cmx_home / "cache" / "replay").iterdir())
    assert len(memos) == 2
    _expire(memos[0])
    (memos[0].parent / "junk.json").write_text("{")
    assert cli("cache", "prune").code == 0
    assert sorted((cmx_home / "cache" / "replay").iterdir()) == memos[1:]


def test_cmx_no_replay_turns_it_off(cli, monkeypatch) -> None:
    _warm(cli, "--tags=detect,os")
    monkeypatch.setenv("CMX_NO_REPLAY", "1")
    assert REPLAYED not in _run(cli, "--tags=detect,os").err


def test_the_replay_loads_neither_plugins_nor_pluggy(cmx_home) -> None:
    """A real process: the replay's import set stays small (this is what makes it fast)."""
    code = (
        "import sys; from cmx_core.cli.main import main; rc = main(['run', 'recipe', '--tags=detect,os', '-v']);"
        "heavy = sorted(m for m in ('pluggy', 'cmx_core.run.engine', 'cmx_core.providers.types', 'cmx_detect.plugin',"
        " 'argparse', 'pathlib', 'typing', 'inspect', 'dataclasses') if m in sys.modules);"
        "print(rc, heavy, file=sys.stderr)"
    )
    env = {**os.environ, "CMX_HOME": str(cmx_home)}
    results = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
               for _ in range(3)]
    assert all(r.returncode == 0 for r in results), results[-1].stderr
    assert REPLAYED not in results[0].stderr and REPLAYED in results[2].stderr
    assert results[0].stderr.strip().splitlines()[-1].startswith("0 ['argparse'")  # the full path
    assert results[2].stderr.strip().splitlines()[-1] == "0 []", results[2].stderr


# -- references -----------------------------------------------------------------------------


def _module_level(x: int) -> int:
    return x + 1


def test_references_round_trip_functions_and_partials() -> None:
    ref = reference(_module_level)
    assert ref == ["fn", __name__, "_module_level"]
    assert resolve(ref) is _module_level
    bound = reference(partial(_module_level, _module_level))
    assert bound is not None and bound[0] == "partial"
    assert resolve(bound).func is _module_level


@pytest.mark.parametrize("fn", [lambda: 1, partial(_module_level, x=1), partial(_module_level, object()),
                                 str.upper, object()])
def test_callables_that_cannot_be_found_by_name_have_no_reference(fn) -> None:
    assert reference(fn) is None


@pytest.mark.parametrize("ref", [[], ["fn", "no_such_module_here", "x"], ["fn", "os", "no_such_name"],
                                 ["partial", ["fn", "os", "getcwd"], "not-a-list"], ["other"]])
def test_bad_references_raise(ref) -> None:
    with pytest.raises((ImportError, AttributeError, ValueError)):
        resolve(ref)


def test_a_replayed_run_directory_has_what_the_full_path_writes(cli, cmx_home) -> None:
    _warm(cli, "--tags=detect,os")
    replayed = _run(cli, "--tags=detect,os")
    assert replayed.code == 0 and REPLAYED in replayed.err, replayed.err  # the replay wrote it
    run_dir = Path(replayed.out.strip().splitlines()[-1].removeprefix("result: ")).parent
    assert sorted(p.name for p in run_dir.iterdir()) == ["facts.json", "lock.json", "nodes.json", "plan.json",
                                                        "result.json"]
    assert json.loads((run_dir / "nodes.json").read_text())[0]["status"] == "cached"
