"""``cmx repo add|list|update|rm`` over real git repositories made here: a run from an
added repository, an update after a new commit, and a replay of the old lock that checks out
the old commit; bundles (offline), refs, bad input, and git never reached through a shell."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

RECIPE = """\
name: repo-greet
version: "1.0"
tags: [repo-greet]
summary: Say which commit of the repository this is
steps:
  - uses: shell
    with: {{cmd: [echo, '{{"message": "{message}"}}'], parse: json}}
outputs:
  message: {{description: the greeting}}
"""

Cli = Callable[..., Any]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    """Write the recipe saying ``message`` and commit it; the new commit id."""
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        _git(repo, "init", "-q", "-b", "main")
    (repo / "greet.yaml").write_text(RECIPE.format(message=message))
    _git(repo, "add", "greet.yaml")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


_RUNS = [0]


def _run(cli: Cli, *args: str) -> dict[str, Any]:
    """``cmx run ARGS --json`` into a fresh ``--output`` directory (``_lock_of`` finds it)."""
    _RUNS[0] += 1
    output = Path(cli.tmp) / f"run-{_RUNS[0]}"  # type: ignore[attr-defined]
    result = cli("run", *args, "--output", str(output), "--json")
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    document["_run_dir"] = str(output)
    return document


def _lock_of(document: dict[str, Any]) -> Path:
    return Path(document["_run_dir"]) / "lock.json"


@pytest.fixture(autouse=True)
def _runs_dir(cli: Cli, tmp_path: Path) -> None:
    cli.tmp = tmp_path / "runs"  # type: ignore[attr-defined]


def test_add_run_update_and_replay_of_the_old_lock_uses_the_old_commit(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "greetings"
    first = _commit(source, "v1")
    added = cli("repo", "add", str(source), "--json")
    assert added.code == 0, added.err
    assert json.loads(added.out) | {"added_at": "", "updated_at": ""} == {
        "name": "greetings", "url": str(source), "ref": None, "commit": first, "kind": "cmx", "recipes": 1,
        "added_at": "", "updated_at": ""}
    listed = json.loads(cli("list", "recipes", "--tags=repo-greet", "--json").out)
    assert [(r["name"], r["source"]) for r in listed] == [("repo-greet", "repo:greetings")]
    old = _run(cli, "repo-greet")
    assert old["outputs"]["message"] == "v1"
    assert old["provenance"]["repos"] == [{"name": "greetings", "url": str(source), "commit": first, "kind": "cmx"}]
    assert [r["source"] for r in old["provenance"]["recipes"]] == ["repo:greetings"]
    old_lock = _lock_of(old)
    assert json.loads(old_lock.read_text())["repos"][0]["commit"] == first
    assert _run(cli, "repo-greet")["outputs"]["message"] == "v1"  # the same invocation again (warm path)

    second = _commit(source, "v2")
    assert _run(cli, "repo-greet")["outputs"]["message"] == "v1"  # pinned: a new commit changes nothing
    updated = cli("repo", "update")
    assert updated.code == 0 and updated.out.strip() == f"greetings: {first[:12]} -> {second[:12]}", updated.err
    new = _run(cli, "repo-greet")
    assert new["outputs"]["message"] == "v2" and new["provenance"]["repos"][0]["commit"] == second

    replay = _run(cli, "--lock", str(old_lock))
    assert replay["outputs"]["message"] == "v1"
    assert replay["provenance"]["repos"][0]["commit"] == first
    assert json.loads(_lock_of(replay).read_text())["repos"][0]["commit"] == first
    listed = json.loads(cli("repo", "list", "--json").out)["repos"]
    assert [(r["name"], r["commit"]) for r in listed] == [("greetings", second)]  # replay moved nothing
    assert cli("repo", "update", "greetings").out.strip() == f"greetings: up to date at {second[:12]}"


def test_a_bundle_adds_offline_at_a_ref_and_rm_removes_it(cli: Cli, tmp_path: Path, cmx_home: Path) -> None:
    source = tmp_path / "src"
    first = _commit(source, "v1")
    _git(source, "tag", "v1")
    _commit(source, "v2")
    bundle = tmp_path / "greet.bundle"
    _git(source, "bundle", "create", "-q", str(bundle), "--all")
    added = cli("repo", "add", str(bundle), "--ref", "v1", "--json")
    assert added.code == 0, added.err
    assert (json.loads(added.out)["name"], json.loads(added.out)["commit"]) == ("greet", first)
    assert _run(cli, "repo-greet")["outputs"]["message"] == "v1"
    plain = cli("repo", "list", "--format", "plain", "--wide")
    assert plain.out.split("\n")[1].split() == ["greet", first[:12], "cmx", "v1", str(bundle)]
    removed = cli("repo", "rm", "greet")
    assert removed.code == 0 and removed.out.strip() == f"removed greet (was at {first[:12]})"
    assert json.loads(cli("repo", "list", "--json").out) == {"repos": []}
    assert not list((cmx_home / "cache" / "repos" / "git").iterdir())
    assert not (cmx_home / "cache" / "repos" / "trees" / "greet").exists()
    assert cli("run", "repo-greet").code == 2  # its recipes left the catalog


def test_a_lock_naming_a_removed_repository_says_how_to_add_it(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "greetings"
    _commit(source, "v1")
    assert cli("repo", "add", str(source)).code == 0
    lock = _lock_of(_run(cli, "repo-greet"))
    assert cli("repo", "rm", "greetings").code == 0
    again = cli("run", "--lock", str(lock))
    assert again.code == 2 and len(again.err_lines) == 1 and "Traceback" not in again.err
    assert "recipe repository 'greetings'" in again.err and f"cmx repo add {source} --name greetings" in again.err


@pytest.mark.parametrize(("args", "needle"), [
    (["{missing}"], "no such file or directory, and not a URL"),
    (["file://{missing}"], "cannot clone it"),
    (["{plain}"], "cannot clone it"),
    (["{repo}", "--ref", "no-such-branch"], "--ref no-such-branch: not a branch, tag or commit"),
    (["{repo}", "--name", "a b"], "--name 'a b': a repository name is"),
    (["{empty}"], "no recipes in it"),
    (["--", "-x"], "not a path or URL"),
])
def test_bad_sources_and_refs_are_one_line_exit_2_leaving_nothing(cli: Cli, tmp_path: Path, cmx_home: Path,
                                                                  args: list[str], needle: str) -> None:
    _commit(tmp_path / "repo", "v1")
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q", "-b", "main")
    (empty / "README").write_text("no recipes here\n")
    _git(empty, "add", "README")
    _git(empty, "commit", "-q", "-m", "readme")
    (tmp_path / "plain").mkdir()
    filled = [a.format(missing=tmp_path / "missing", plain=tmp_path / "plain", repo=tmp_path / "repo", empty=empty)
              for a in args]
    result = cli("repo", "add", *filled)
    assert result.code == 2, result.err
    assert len(result.err_lines) == 1 and needle in result.err and "Traceback" not in result.err
    as_json = cli("repo", "add", "--json", *filled)
    assert as_json.code == 2 and needle in json.loads(as_json.out)["error"]
    assert json.loads(cli("repo", "list", "--json").out) == {"repos": []}
    clones = cmx_home / "cache" / "repos" / "git"
    assert not clones.exists() or not list(clones.iterdir())


def test_git_gets_the_source_as_one_argument_never_through_a_shell(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "a;touch pwned $(touch pwned2)"
    _commit(source, "v1")
    added = cli("repo", "add", str(source), "--name", "odd")
    assert added.code == 0, added.err
    assert not (tmp_path / "pwned").exists() and not Path("pwned2").exists() and not (tmp_path / "pwned2").exists()
    assert _run(cli, "repo-greet")["outputs"]["message"] == "v1"


def test_update_and_rm_of_an_unknown_name_say_what_is_added(cli: Cli) -> None:
    for action in ("update", "rm"):
        result = cli("repo", action, "nope")
        assert result.code == 2 and "repo 'nope': not added (none added)" in result.err


def test_concurrent_adds_both_land_in_the_list(tmp_path: Path, cmx_home: Path) -> None:
    """The file lock serialises the read-modify-write of the list: neither add is lost."""
    import os
    import sys

    sources = [tmp_path / f"r{i}" for i in range(4)]
    for source in sources:
        _commit(source, "v1")
    env = {**os.environ, "CMX_HOME": str(cmx_home)}
    procs = [subprocess.Popen([sys.executable, "-m", "cmx_core", "repo", "add", str(s)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for s in sources]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    listing = json.loads((cmx_home / "data" / "repos.json").read_text())["repos"]
    assert sorted(r["name"] for r in listing) == ["r0", "r1", "r2", "r3"]


def test_an_old_pinned_commit_survives_gc_and_a_name_is_added_once(cli: Cli, tmp_path: Path,
                                                                   cmx_home: Path) -> None:
    """``refs/cmx/pins/<commit>`` keeps every pinned commit: after a force-push drops v1 from
    the source and ``git gc --prune=now`` runs in the clone, the old lock still replays."""
    source = tmp_path / "greetings"
    first = _commit(source, "v1")
    assert cli("repo", "add", str(source)).code == 0
    lock = _lock_of(_run(cli, "repo-greet"))
    _git(source, "checkout", "-q", "--orphan", "other")
    _commit(source, "v2")
    _git(source, "branch", "-q", "-f", "main", "other")
    _git(source, "checkout", "-q", "main")
    _git(source, "branch", "-q", "-D", "other")
    _git(source, "reflog", "expire", "--expire=now", "--all")
    _git(source, "gc", "-q", "--prune=now")
    assert cli("repo", "update").code == 0
    shutil.rmtree(cmx_home / "cache" / "repos" / "trees")  # made again from the clone on demand
    clone = cmx_home / "cache" / "repos" / "git" / "greetings.git"
    subprocess.run(["git", "--git-dir", str(clone), "gc", "-q", "--prune=now"], check=True)
    assert _git(clone, "rev-parse", f"refs/cmx/pins/{first}") == first
    assert _run(cli, "--lock", str(lock))["outputs"]["message"] == "v1"
    twice = cli("repo", "add", str(source))
    assert twice.code == 2 and "repo 'greetings' is already added" in twice.err


def test_the_ext_transport_never_runs_a_command(cli: Cli, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    result = cli("repo", "add", f"ext::touch {planted}", "--name", "ext")
    assert result.code == 2 and len(result.err_lines) == 1 and "cannot clone it" in result.err
    assert not planted.exists()


def test_a_warm_replay_memo_is_refused_after_repo_update(cli: Cli, tmp_path: Path) -> None:
    """The memo of an identical fully cached run depends on the repository list, so it does
    not replay the old commit's recipe after ``cmx repo update``."""
    source = tmp_path / "greetings"
    _commit(source, "v1")
    assert cli("repo", "add", str(source)).code == 0
    argv = ("run", "repo-greet", "-v")
    for _ in range(2):  # the first run fills the cache; the second, all cache hits, leaves a memo
        assert 'message: "v1"' in cli(*argv).out
    warm = cli(*argv)
    assert 'message: "v1"' in warm.out and "replayed without loading plugins" in warm.err
    _commit(source, "v2")
    assert cli("repo", "update", "greetings").code == 0
    after = cli(*argv)
    assert 'message: "v2"' in after.out and "repos.json changed" in after.err


def test_docs_repos_names_real_tests_and_commands(cli: Cli) -> None:
    """Every test docs/repos.md cites exists, and every ``cmx repo`` action it shows parses."""
    import re

    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "repos.md").read_text(encoding="utf-8")
    files = [*root.glob("tests/*.py"), *root.glob("plugins/*/tests/*.py")]
    sources = "".join(p.read_text(encoding="utf-8") for p in files)
    cited = set(re.findall(r"`(?:[\w/.]+::)?(test_\w+)`", doc))
    assert cited and all(f"def {name}(" in sources for name in cited), cited
    for action in set(re.findall(r"^cmx repo (\w+)", doc, re.M)):
        assert cli("repo", action, "--help").code == 0, action
    assert "docs/repos.md" in (root / "README.md").read_text(encoding="utf-8")


BROKEN = """\
name: repo-broken
tags: [repo-broken]
summary: a step with a key no step has
steps:
  - {uses: shell, with: {cmd: [echo, hi]}, nosuchkey: 1}
"""


@pytest.mark.parametrize("strict", [False, True])
def test_broken_recipe_files_are_named_in_the_users_checkout(cli: Cli, tmp_path: Path, cmx_home: Path,
                                                            monkeypatch: pytest.MonkeyPatch, strict: bool) -> None:
    """#50 item 3: a repository whose recipe files all fail is refused naming the first file
    and line in the user's checkout (it said "no recipes in it"); one broken file beside good
    ones is named there too, on ``repo add`` and in the warnings of later commands, never as
    the cache's copy. Under --strict (CI) too, the refused add leaves nothing behind."""
    if strict:
        monkeypatch.setenv("CMX_STRICT", "1")
    broken_only = tmp_path / "broken-only"
    broken_only.mkdir()
    _git(broken_only, "init", "-q", "-b", "main")
    (broken_only / "bad.yaml").write_text(BROKEN)
    _git(broken_only, "add", "bad.yaml")
    _git(broken_only, "commit", "-q", "-m", "bad")
    refused = cli("repo", "add", str(broken_only))
    assert refused.code == 2 and len(refused.err_lines) == 1, refused.err
    assert "none of its recipe files loads at " in refused.err and f"{broken_only}/bad.yaml:5: steps.0.nosuchkey" \
        in refused.err and "nothing was added" in refused.err
    assert json.loads(cli("repo", "list", "--json").out) == {"repos": []}
    mixed = tmp_path / "mixed"
    _commit(mixed, "v1")
    (mixed / "bad.yaml").write_text(BROKEN)
    _git(mixed, "add", "bad.yaml")
    _git(mixed, "commit", "-q", "-m", "bad")
    added = cli("repo", "add", str(mixed))
    assert added.code == 0, added.err
    assert f"{mixed}/bad.yaml:5: steps.0.nosuchkey" in added.err
    later = cli("list", "recipes", "--tags=repo-greet")
    cache = str(cmx_home / "cache")
    assert f"{mixed}/bad.yaml:5" in later.err and cache not in later.err, later.err
