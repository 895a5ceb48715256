"""CM's lifecycle order through the bridge: deps -> preprocess -> prehook_deps -> run.sh ->
posthook_deps -> postprocess -> post_deps, each run-time dep decided against the env as it
is when its turn comes, and every decision recorded in the result's ``lifecycle`` output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cm_helpers import outputs, write_script

from cmx_cm.collection import import_collection
from cmx_cm.conditions import runtime_decision


def _logger(name: str, log: Path) -> dict[str, str]:
    """A script that appends its name to ``log`` from run.sh."""
    return {"run_sh": f'echo "{name}" >> "{log}"\n'}


def _order_collection(root: Path, log: Path) -> None:
    for name in ("dep", "dyn", "prehook", "posthook", "post", "never"):
        write_script(root, f"step-{name}", f"alias: step-{name}\ntags: [step, {name}]\n", **_logger(name, log))
    write_script(root, "main", """
        alias: main
        tags: [main]
        new_env_keys: [CM_MAIN_*]
        deps:
          - tags: step,dyn
            skip_if_env: {CM_SET_BY_NOBODY: ['yes']}
          - tags: step,dep
        prehook_deps:
          - tags: step,prehook
            enable_if_env: {CM_MAIN_PRE: ['yes']}
          - tags: step,never
            enable_if_env: {CM_MAIN_RUN: ['yes']}
        posthook_deps:
          - tags: step,posthook
            enable_if_env: {CM_MAIN_RUN: ['yes']}
        post_deps:
          - tags: step,post
            skip_if_env: {CM_MAIN_POSTPROCESSED: ['no']}
        """, customize=f"""
        def preprocess(i):
            open({str(log)!r}, 'a').write('preprocess\\n')
            i['env']['CM_MAIN_PRE'] = 'yes'
            return {{'return': 0}}

        def postprocess(i):
            open({str(log)!r}, 'a').write('postprocess\\n')
            i['env']['CM_MAIN_POSTPROCESSED'] = 'yes'
            return {{'return': 0}}
        """, run_sh=f'echo "run" >> "{log}"\necho "CM_MAIN_RUN=yes" > tmp-run-env.out\n')


def test_lifecycle_order_and_run_time_decisions(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out, log = tmp_path / "c" / "script", tmp_path / "out", tmp_path / "order.log"
    _order_collection(root, log)
    import_collection(root, out)
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,main", "--recipes", str(out), "--json"))
    # step-never's enable_if_env reads CM_MAIN_RUN, which run.sh sets only after prehook time
    # step,dyn's condition reads a key no input declares: a run-time dep, after the planned deps
    assert log.read_text().split() == ["dep", "dyn", "preprocess", "prehook", "run", "posthook", "postprocess",
                                       "post"]
    decisions = {(d["kind"], d["tags"]): (d["ran"], d["reason"]) for d in got["lifecycle"]}
    assert decisions[("prehook_deps", "cm,step,never,step-never")][0] is False
    assert "does not hold" in decisions[("prehook_deps", "cm,step,never,step-never")][1]
    assert decisions[("prehook_deps", "cm,step,prehook,step-prehook")][0] is True
    assert [d["kind"] for d in got["lifecycle"]] == ["deps", "prehook_deps", "prehook_deps", "posthook_deps",
                                                     "post_deps"]
    assert got["new_env"]["CM_MAIN_RUN"] == "yes"


def test_run_time_deps_are_in_the_plan_as_conditional(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out, log = tmp_path / "c" / "script", tmp_path / "out", tmp_path / "order.log"
    _order_collection(root, log)
    import_collection(root, out)
    proc = cmx_cli("plan", "--tags=cm,main", "--recipes", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    main = next(n for n in plan["nodes"] if n["recipe"] == "cm.main")
    hooks = main["steps"][0]["rendered"]["hooks"]
    never = next(h for h in hooks if "never" in h["tags"])
    assert never["kind"] == "prehook_deps" and never["if"] == {"enable_if_env": {"CM_MAIN_RUN": ["yes"]}}
    assert [h["kind"] for h in hooks] == ["deps", "prehook_deps", "prehook_deps", "posthook_deps", "post_deps"]
    assert [n["recipe"] for n in plan["nodes"]] == ["cm.step-dep", "cm.main"]  # only deps run before the node
    text = cmx_cli("plan", "--tags=cm,main", "--recipes", str(out), "--wide")  # a line a dep
    assert text.returncode == 0 and "hooks:" in text.stdout and "step-never" in text.stdout
    # shown as conditional deps, each with the rule decided at its turn (#34: plan and explain)
    conditional = main["steps"][0]["conditional_deps"]
    assert [d["stage"] for d in conditional] == [h["kind"] for h in hooks]
    never_dep = next(d for d in conditional if "never" in d["tags"])
    assert never_dep["condition"] == "enable_if_env CM_MAIN_RUN in [yes]"
    dyn = next(d for d in conditional if "dyn" in d["tags"])
    assert dyn["stage"] == "deps" and dyn["condition"] == "skip_if_env CM_SET_BY_NOBODY in [yes]"
    shown = [line.strip() for line in text.stdout.splitlines() if line.strip().startswith("conditional dep ")]
    assert len(shown) == 5 and any(line.endswith("(prehook_deps; decided at run time: if enable_if_env "
                                                 "CM_MAIN_RUN in [yes])") for line in shown), shown
    explained = cmx_cli("explain", "--tags=cm,main", "--recipes", str(out), "--wide")
    assert explained.returncode == 0, explained.stderr
    lines = [line.strip() for line in explained.stdout.splitlines() if line.strip().startswith("conditional dep ")]
    assert lines == shown
    as_json = json.loads(cmx_cli("explain", "--tags=cm,main", "--recipes", str(out), "--json").stdout)
    assert as_json["conditional_deps"][main["id"]] == conditional
    assert not log.exists()  # planning ran nothing


def test_post_dep_depending_back_is_skipped_by_the_env(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """get-gcc's shape: ``post_deps: get,cc-flags``, whose ``get,cc`` dep is skipped when the
    caller's env has CM_CC_BIN (set by get-cc's run.sh) -- as in CM, where the post dep sees it."""
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "get-cc", """
        alias: get-cc
        tags: [get, cc]
        new_env_keys: [CM_CC_*, +CFLAGS]
        post_deps: [{tags: 'get,cc-flags'}]
        """, run_sh='echo "CM_CC_BIN=/usr/bin/cc" > tmp-run-env.out\n')
    write_script(root, "get-cc-flags", """
        alias: get-cc-flags
        tags: [get, cc-flags]
        new_env_keys: [+CFLAGS]
        deps: [{tags: 'get,cc', skip_if_env: {CM_CC_BIN: ['on']}}]
        """, customize="""
        def postprocess(i):
            i['env']['+CFLAGS'] = ['-O2 for ' + i['env'].get('CM_CC_BIN', 'none')]
            return {'return': 0}
        """)
    import_collection(root, out)
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,get,cc", "--recipes", str(out), "--json"))
    assert got["new_env"]["CM_CC_BIN"] == "/usr/bin/cc"
    assert got["new_env"]["+CFLAGS"] == ["-O2 for /usr/bin/cc"]
    assert [(d["kind"], d["ran"]) for d in got["lifecycle"]] == [("post_deps", True)]
    # run on its own, get-cc-flags takes its dep (no CM_CC_BIN yet): get-cc runs, and its post
    # dep get-cc-flags, given CM_CC_BIN, skips that dep -- the recursion CM goes through too
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,get,cc-flags", "--recipes", str(out), "--json"))
    assert got["lifecycle"][0]["kind"] == "deps" and got["lifecycle"][0]["ran"] is True
    assert got["new_env"]["+CFLAGS"] == ["-O2 for /usr/bin/cc"]


def test_a_dep_that_never_stops_is_refused(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "loop-a", "alias: loop-a\ntags: [loop, a]\npost_deps: [{tags: 'loop,b'}]\n")
    write_script(root, "loop-b", "alias: loop-b\ntags: [loop, b]\n"
                                 "deps: [{tags: 'loop,a', skip_if_env: {CM_NEVER_SET: ['on']}}]\n")
    import_collection(root, out)
    proc = cmx_cli("run", "recipe", "--tags=cm,loop,a", "--recipes", str(out), "--json", timeout=600)
    assert proc.returncode == 1, proc.stderr[-800:]
    assert "depends back" in proc.stderr and "Traceback" not in proc.stderr


def test_runtime_decision_is_cms_rule() -> None:
    assert runtime_decision({"enable_if_env": {"K": ["yes"]}}, {"K": "on"})[0] is True
    assert runtime_decision({"enable_if_env": {"K": ["yes"]}}, {"K": "no"})[0] is False
    assert runtime_decision({"enable_if_env": {"K": ["yes"]}}, {})[0] is False
    assert runtime_decision({"skip_if_env": {"K": ["on"]}}, {"K": "/usr/bin/cc"})[0] is False
    assert runtime_decision({"skip_if_env": {"K": ["no"]}}, {})[0] is False  # a missing key is "no"
    assert runtime_decision({"enable_if_env": {"K": ["a", "b"]}}, {"K": "B"})[0] is True
    assert runtime_decision({"enable_if_any_env": {"K": ["x"], "L": ["y"]}}, {"L": "y"})[0] is True
    assert runtime_decision({"skip_if_any_env": {"K": ["x"], "L": ["y"]}}, {"L": "y"})[0] is False
    assert runtime_decision({}, {}) == (True, "no condition stops it")


def test_combination_variations_apply_when_all_parts_are_selected(tmp_path: Path,
                                                                   cmx_cli: Callable[..., Any]) -> None:
    root, out, log = tmp_path / "c" / "script", tmp_path / "out", tmp_path / "order.log"
    write_script(root, "step-dep", "alias: step-dep\ntags: [step, dep]\n", **_logger("combo-dep", log))
    write_script(root, "combo", """
        alias: combo
        tags: [combo]
        new_env_keys: [CM_COMBO_*]
        default_env: {CM_COMBO_D: script-default}
        variations:
          a: {env: {CM_COMBO_A: 'yes'}, default_env: {CM_COMBO_D: a-default, CM_COMBO_F: a-default}}
          b: {env: {CM_COMBO_B: 'yes'}}
          'a,b':
            env: {CM_COMBO_BOTH: 'yes'}
            default_env: {CM_COMBO_D: combo-default, CM_COMBO_E: combo-default}
            new_env_keys: [CM_BOTH_SEEN]
            deps: [{tags: 'step,dep'}]
        """, run_sh='echo "CM_BOTH_SEEN=${CM_COMBO_BOTH:-no}" > tmp-run-env.out\n')
    import_collection(root, out)
    only_a = outputs(cmx_cli("run", "recipe", "--tags=cm,combo,a", "--recipes", str(out), "--json"))
    assert "CM_COMBO_BOTH" not in only_a["new_env"] and "CM_BOTH_SEEN" not in only_a["new_env"]
    assert not log.exists() and only_a["lifecycle"] == []
    # a variation's default_env, as CM's: only where the key is unset (the script's default_env set D)
    assert (only_a["new_env"]["CM_COMBO_D"], only_a["new_env"]["CM_COMBO_F"]) == ("script-default", "a-default")
    both = outputs(cmx_cli("run", "recipe", "--tags=cm,combo,a,b", "--recipes", str(out), "--json"))
    assert both["new_env"]["CM_COMBO_BOTH"] == "yes" and both["new_env"]["CM_BOTH_SEEN"] == "yes"
    # default_env fills only unset keys: the script's own default_env had set CM_COMBO_D
    assert both["new_env"]["CM_COMBO_D"] == "script-default" and both["new_env"]["CM_COMBO_E"] == "combo-default"
    assert log.read_text().split() == ["combo-dep"]
    assert [(d["kind"], d["ran"]) for d in both["lifecycle"]] == [("deps", True)]


def test_keys_not_carried_exactly_are_said_once_during_a_run(collection: Path, tmp_path: Path,
                                                               cmx_cli: Callable[..., Any]) -> None:
    out = tmp_path / "out"
    import_collection(collection, out)
    for extra, env in ((["--recipes", str(out)], None), ([], {"CMX_CM_PATH": str(collection)})):
        proc = cmx_cli("run", "recipe", "--tags=cm,demo,dynamic", *extra, "--json", env=env)
        got = outputs(proc)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("cmx-cm: cm.demo-dynamic:")]
        assert len(lines) == 1 and "unknown_cm_key" in lines[0], proc.stderr
        assert {"key": "unknown_cm_key", "kind": "unmapped",
                "reason": "script option with no cmx equivalent"} in got["not_exact"]


def test_detections_follow_cms_caching_unless_asked(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """CM re-runs a detect script that is not ``cache: true`` every time; so does the bridge,
    unless --cache-detections (import) or CMX_CM_CACHE_DETECTIONS (live path) asks otherwise."""
    root, log = tmp_path / "c" / "script", tmp_path / "runs.log"
    write_script(root, "detect-thing", "alias: detect-thing\ntags: [detect, thing]\n", **_logger("ran", log))

    def runs(*extra: str, env: dict[str, str] | None = None) -> int:
        for _ in range(2):
            outputs(cmx_cli("run", "recipe", "--tags=cm,detect,thing", *extra, "--json", env=env))
        count = len(log.read_text().split())
        log.unlink()
        return count

    plain, cached = tmp_path / "plain", tmp_path / "cached"
    assert cmx_cli("import", "cm", str(root), "--out", str(plain)).returncode == 0
    assert runs("--recipes", str(plain)) == 2  # as CM: twice
    assert cmx_cli("import", "cm", str(root), "--out", str(cached), "--cache-detections", "1d").returncode == 0
    assert runs("--recipes", str(cached)) == 1
    assert runs(env={"CMX_CM_PATH": str(root)}) == 2
    assert runs(env={"CMX_CM_PATH": str(root), "CMX_CM_CACHE_DETECTIONS": "12h"}) == 1
    bad = cmx_cli("import", "cm", str(root), "--out", str(tmp_path / "bad"), "--cache-detections", "soon")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "duration" in bad.stderr


def test_variation_alias_state_and_tags_from_env(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "get-lib", """
        alias: get-lib
        tags: [get, lib]
        new_env_keys: [CM_LIB_*]
        variations:
          version.#: {env: {CM_LIB_VERSION: '#'}}
        """)
    write_script(root, "user", """
        alias: user
        tags: [user]
        new_env_keys: [CM_LIB_*]
        new_state_keys: [user_*]
        default_env: {CM_WANTED_LIB: '3.1'}
        deps:
          - tags: get,lib
            update_tags_from_env_with_prefix: {_version.: [CM_WANTED_LIB]}
        variations:
          tensorflow: {state: {user_backend: tf}, env: {CM_USER_TF: 'yes'}}
          tf: {alias: tensorflow}
        """)
    result = import_collection(root, out)
    user = next(t for t in result.translations if t.name == "cm.user")
    assert not [i for i in user.issues if i.kind != "ignored"], user.issues
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,user,tf", "--recipes", str(out), "--json"))
    assert got["new_env"]["CM_LIB_VERSION"] == "3.1"  # the dep's tags got _version.3.1 from the env
    assert got["new_state"] == {"user_backend": "tf"}  # tf is an alias of tensorflow, whose state it sets
    assert got["lifecycle"][0]["tags"] == "cm,get,lib,get-lib,version.3.1"


def test_the_scripts_own_output_is_shown_with_v(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "chatty", "alias: chatty\ntags: [chatty]\n", run_sh="echo 'hello from run.sh'\n",
                 customize="def preprocess(i):\n    print('hello from customize.py')\n    return {'return': 0}\n\n"
                           "def postprocess(i):\n    print('hello from postprocess')\n    return {'return': 0}\n")
    import_collection(root, out)
    quiet = cmx_cli("run", "recipe", "--tags=cm,chatty", "--recipes", str(out), "--no-cache")
    assert quiet.returncode == 0, quiet.stderr
    assert "hello from" not in quiet.stderr and "hello from" not in quiet.stdout
    for command in (["run", "recipe", "--tags=cm,chatty"], ["run", "script", "--tags=cm,chatty"],
                    ["cm", "run", "script", "--tags=chatty"]):
        loud = cmx_cli(*command, "--recipes", str(out), "--no-cache", "-v")
        assert loud.returncode == 0, loud.stderr
        assert "cmx: cm.chatty | hello from customize.py" in loud.stderr, command
        assert "cmx: cm.chatty | hello from run.sh" in loud.stderr, command
        said = [line.split("| ", 1)[1] for line in loud.stderr.splitlines() if "| hello from" in line]
        assert said == ["hello from customize.py", "hello from run.sh", "hello from postprocess"], command  # CM's order
        assert "hello from" not in loud.stdout


def test_env_options_for_bridged_scripts_in_cmx_run(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """``cmx run script|recipe`` and ``cmx plan`` take ``--env.KEY=VALUE`` for a bridged script
    (into its ``cm_env``, merged with one given as JSON); a plain cmx recipe refuses it in one line."""
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "say", "alias: say\ntags: [say]\nnew_env_keys: [CM_SAID]\n",
                 run_sh='echo "CM_SAID=$CM_UNDECLARED:$CM_OTHER" > tmp-run-env.out\n')
    import_collection(root, out)
    for noun in ("script", "recipe"):
        proc = cmx_cli("run", noun, "--tags=cm,say", "--recipes", str(out), "--env.CM_UNDECLARED=hi",
                       "--env.CM_OTHER=x", "--json")
        assert proc.returncode == 0, proc.stderr
        assert outputs(proc)["new_env"] == {"CM_SAID": "hi:x"}
    merged = cmx_cli("run", "script", "--tags=cm,say", "--recipes", str(out), "--env.CM_UNDECLARED=flag",
                     '--cm_env={"CM_OTHER": "json", "CM_UNDECLARED": "json"}', "--json")
    assert outputs(merged)["new_env"] == {"CM_SAID": "flag:json"}  # --env.KEY wins over the JSON's key
    plan = cmx_cli("plan", "--tags=cm,say", "--recipes", str(out), "--env.CM_UNDECLARED=a=b", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(json.loads(plan.stdout)["nodes"][0]["inputs"]["cm_env"]) == {"CM_UNDECLARED": "a=b"}
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "echo.yaml").write_text("name: echo\ntags: [echo]\nsummary: echoes\ncache: false\n"
                                     "steps:\n  - {uses: shell, with: {cmd: [echo, hi]}}\n")
    for bad in (["--env.CM_X=1"], ["--env.=1"]):
        refused = cmx_cli("run", "script", "--tags=echo", "--recipes", str(plain), *bad)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    refused = cmx_cli("run", "script", "--tags=echo", "--recipes", str(plain), "--env.CM_X=1")
    assert "'--env.CM_X=1'" in refused.stderr and "recipe echo" in refused.stderr and "cm.script" in refused.stderr
    bad_json = cmx_cli("run", "script", "--tags=cm,say", "--recipes", str(out), "--env.CM_X=1", "--cm_env=[1]")
    assert bad_json.returncode == 2 and "expected a JSON object" in bad_json.stderr, bad_json.stderr


def test_cm_command_line_env_and_cms_choice(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    for alias, sort in (("say-b", 10), ("say-a", 10), ("say-z", 5)):
        write_script(root, alias, f"alias: {alias}\ntags: [say]\nsort: {sort}\nnew_env_keys: [CM_SAID]\n",
                     run_sh=f'echo "CM_SAID={alias}:$CM_UNDECLARED" > tmp-run-env.out\n')
    write_script(root, "other", "alias: other\ntags: [other]\nvariations: {say: {}}\n")
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0
    proc = cmx_cli("cm", "run", "script", "--tags=say", "--recipes", str(out), "--env.CM_UNDECLARED=hi", "--json")
    assert outputs(proc)["new_env"] == {"CM_SAID": "say-z:hi"}  # the lowest sort; a variation 'say' is no match
    line = next(x for x in proc.stderr.splitlines() if "match 3 scripts" in x)
    assert "took say-z (sort 5" in line and "not say-a (sort 10), say-b (sort 10)" in line
    explained = cmx_cli("cm", "explain", "script", "--tags=say", "--recipes", str(out))
    assert explained.returncode == 0, explained.stderr
    first, query = explained.stdout.split("\nquery: ", 1)  # the choice's paragraph, then explain's lines
    first = " ".join(first.split())
    assert "took say-z (sort 5" in first and "the lowest sort, then the path" in first
    assert query.startswith("tags cm,say-z -> cm.say-z")
    as_json = cmx_cli("cm", "explain", "script", "--tags=say", "--recipes", str(out), "--json")
    assert json.loads(as_json.stdout)["error"] is None and "took say-z" in as_json.stderr
    live = cmx_cli("cm", "run", "script", "--tags=say", "--env.CM_UNDECLARED=live", "--json",
                   env={"CMX_CM_PATH": str(root)})
    assert outputs(live)["new_env"] == {"CM_SAID": "say-z:live"}
    for bad in (["--tags=nothing,here"], ["--tags=say", "stray"], []):
        proc = cmx_cli("cm", "run", "script", *bad, "--recipes", str(out))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_cached_script_is_taken_before_the_lowest_sort_as_cm_takes_it(tmp_path: Path,
                                                                       cmx_cli: Callable[..., Any]) -> None:
    """CM with a warm cache: ``get,compiler`` takes the compiler script that has a cache entry
    (its cached get-gcc) over the one its sort puts first; cmx does so over its own cache, and
    takes the lowest sort again once that entry is gone (#48 item 2)."""
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    for alias, sort in (("get-llvmx", 5), ("get-gccx", 10)):
        write_script(root, alias, f"alias: {alias}\ntags: [get, compilerx, {alias}]\nsort: {sort}\ncache: true\n"
                                  "new_env_keys: [CM_COMPILERX]\n",
                     run_sh=f'echo "CM_COMPILERX={alias}" > tmp-run-env.out\n')
    assert cmx_cli("import", "cm", str(root), "--out", str(out)).returncode == 0

    def compiler() -> tuple[str, str]:
        proc = cmx_cli("cm", "run", "script", "--tags=get,compilerx", "--recipes", str(out), "--json")
        line = next(x for x in proc.stderr.splitlines() if "match 2 scripts" in x)
        return outputs(proc)["new_env"]["CM_COMPILERX"], line

    assert outputs(cmx_cli("cm", "run", "script", "--tags=get,get-gccx", "--recipes", str(out),
                           "--json"))["new_env"] == {"CM_COMPILERX": "get-gccx"}
    taken, line = compiler()
    assert taken == "get-gccx" and "took get-gccx (sort 10" in line
    assert "of those in the cache (get-gccx; CM prefers a cached script), the lowest sort" in line
    assert cmx_cli("cache", "rm", "--recipe", "cm.get-gccx").returncode == 0
    taken, line = compiler()
    assert taken == "get-llvmx" and "took get-llvmx (sort 5" in line and "in the cache" not in line


def test_a_default_version_is_moved_into_the_asked_range_as_cm_moves_it(tmp_path: Path,
                                                                        cmx_cli: Callable[..., Any]) -> None:
    """CM's rule for a version not asked for: default_version, raised to version_min or lowered
    to version_max_usable (else version_max)."""
    root, out = tmp_path / "c" / "script", tmp_path / "out"
    write_script(root, "versioned", "alias: versioned\ntags: [versioned]\ndefault_version: '1.5'\n"
                                    "new_env_keys: [CM_GOT_VERSION]\n",
                 run_sh='echo "CM_GOT_VERSION=$CM_VERSION" > tmp-run-env.out\n')
    import_collection(root, out)
    for args, version in (((), "1.5"), (("--version_min=2.0",), "2.0"), (("--version_max=1.0",), "1.0"),
                          (("--version_max=1.0", "--version_max_usable=0.9"), "0.9"), (("--version=1.2",), "1.2")):
        got = outputs(cmx_cli("run", "recipe", "--tags=cm,versioned", "--recipes", str(out), *args, "--json"))
        assert got["new_env"] == {"CM_GOT_VERSION": version}, args
