"""A warm cache against warm CM: where a script's dep matches several scripts, CM takes one
already in its cache before the lowest sort, and so does cmx (a dep's ``cached_alternatives``).

get-compiler-flags depends on ``get,compiler``: get-llvm (sort first), get-gcc or get-cl. With
get-gcc run first, CM takes the cached get-gcc; cmx, with get-gcc in its cache, takes it too and
gives the same ``new_env`` and ``new_state``. (Cold, both would try get-llvm, which downloads
LLVM; that is not run here.) CM runs in its own venv, as in ``test_cm_vs_cm.py``, whose
fixtures these are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cm_helpers import outputs
from test_cm_vs_cm import cm_repos, cm_run, cm_venv, imported

__all__ = ["cm_repos", "cm_venv", "imported"]  # the fixtures, shared with test_cm_vs_cm.py


def test_a_dep_takes_the_script_in_the_cache_as_warm_cm_does(cm_venv: Path, cm_repos: Path, imported: Path,
                                                            tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    cm_run(cm_venv, "get,gcc", tmp_path, cm_repos)
    reference = cm_run(cm_venv, "get,compiler-flags", tmp_path, cm_repos)

    outputs(cmx_cli("run", "recipe", "--tags=cm,get,gcc", "--recipes", str(imported), "--json", cwd=tmp_path))
    got = outputs(cmx_cli("run", "recipe", "--tags=cm,get-compiler-flags", "--recipes", str(imported), "--json",
                          cwd=tmp_path))
    assert [(d["kind"], d["recipe"], d["ran"]) for d in got["lifecycle"]] == [("deps", "get-gcc", True)]
    assert got["new_env"] == reference["new_env"] and got["new_state"] == reference["new_state"]
    assert got["new_env"], "the comparison must not be between two empty results"
