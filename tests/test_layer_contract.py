"""The layer contract is enforced, not just written down: ``lint-imports`` (import-linter,
configured in pyproject's ``[tool.importlinter]``) keeps every contract on the real tree, and
fails on a scratch copy of cmx_core given one upward import, one type-only upward import, or
a plugin that reaches past ``cmx_core.api``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _contract_config() -> str:
    """pyproject's import-linter tables, as a config file of their own."""
    lines = (REPO / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("["):
            inside = line.startswith(("[tool.importlinter]", "[[tool.importlinter."))
        if inside:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A copy of cmx_core and the plugins' packages that shadows the installed ones."""
    shutil.copytree(REPO / "cmx_core", tmp_path / "cmx_core", ignore=shutil.ignore_patterns("__pycache__"))
    for src in (REPO / "plugins").glob("*/src"):
        for package in src.iterdir():
            if (package / "__init__.py").is_file():
                shutil.copytree(package, tmp_path / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text(_contract_config(), encoding="utf-8")
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_the_tree_keeps_every_contract() -> None:
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_the_scratch_copy_keeps_them_before_it_is_changed(scratch: Path) -> None:
    done = _lint(scratch)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_breaks_the_layers(scratch: Path) -> None:
    _append(scratch / "cmx_core" / "recipes" / "durations.py", "\nfrom cmx_core.run import engine  # noqa\n")
    done = _lint(scratch)
    assert done.returncode == 1
    assert "cmx_core.recipes is not allowed to import cmx_core.run" in done.stdout
    assert "cmx_core.recipes.durations -> cmx_core.run.engine" in done.stdout


def test_a_type_only_upward_import_counts_too(scratch: Path) -> None:
    _append(scratch / "cmx_core" / "providers" / "values.py",
            "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cmx_core.plan.planner import Plan\n")
    done = _lint(scratch)
    assert done.returncode == 1
    assert "cmx_core.providers.values -> cmx_core.plan.planner" in done.stdout


def test_a_plugin_reaching_past_the_api_breaks_its_contract(scratch: Path) -> None:
    _append(scratch / "cmx_slurm" / "executor.py", "\nfrom cmx_core.run.engine import write_lock  # noqa\n")
    done = _lint(scratch)
    assert done.returncode == 1
    assert "cmx_slurm is not allowed to import cmx_core.run" in done.stdout
