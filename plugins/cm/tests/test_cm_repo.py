"""A CM/MLC repository added with ``cmx repo add`` joins the catalog through the bridge
(cmx-cm's ``cmx_repo_recipes``), with no ``cmx import cm`` step and no ``CMX_CM_PATH``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cm_helpers import outputs

from cmx_cm.plugin import cmx_repo_recipes

Cli = Callable[..., Any]


def _git_repo(root: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                               *args], capture_output=True, text=True, check=True).stdout.strip()
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "scripts")
    return git("rev-parse", "HEAD")


def test_a_cm_repository_is_added_through_the_bridge_and_runs(cmx_cli: Cli, collection: Path) -> None:
    repo = collection.parent  # <repo>/script/<alias>/_cm.yaml, as CM repositories are laid out
    commit = _git_repo(repo)
    added = cmx_cli("repo", "add", str(repo), "--name", "demo-cm", "--json")
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert (doc["kind"], doc["commit"], doc["recipes"]) == ("cm", commit, 4)
    proc = cmx_cli("run", "recipe", "--tags=cm,demo,base", "--json")
    assert outputs(proc)["new_env"]["CM_DEMO_BASE_TEXT"] == "base-ran"
    provenance = json.loads(proc.stdout)["provenance"]
    assert provenance["repos"] == [{"name": "demo-cm", "url": str(repo), "commit": commit, "kind": "cm"}]
    assert {r["source"] for r in provenance["recipes"]} == {"repo:demo-cm"}
    listed = cmx_cli("list", "recipes", "--tags=cm,demo", "--json")
    assert listed.returncode == 0 and "cm.demo-base" in listed.stdout


def test_the_hook_declines_a_tree_that_is_not_a_cm_repository(tmp_path: Path) -> None:
    (tmp_path / "script").mkdir()
    (tmp_path / "script" / "notes").mkdir()
    (tmp_path / "recipe.yaml").write_text("name: x\n")
    assert cmx_repo_recipes(tree=tmp_path) is None
