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


PLUGIN_PACKAGES = sorted(init.parent.name for init in REPO.glob("plugins/*/src/*/__init__.py"))
FORBIDDEN = (("import cmx_core.run.engine  # noqa\n", "cmx_core.run", "cmx_core.run.engine"),
             ("from cmx_core.plan import planner  # noqa\n", "cmx_core.plan", "cmx_core.plan.planner"))
"""(line appended to the plugin's module, the forbidden package named, the module reached)."""


def _one_module(package: Path) -> Path:
    """A module of the plugin's top package other than its ``__init__`` (the first, sorted), else
    the ``__init__``. Not one in a folder without ``__init__.py`` (cmx_cm's ``_shim``, the
    alebench solutions): those are scripts run on their own, outside the package's import graph."""
    modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
    return modules[0] if modules else package / "__init__.py"


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_a_forbidden_import_in_any_plugin_breaks_its_contract(scratch: Path) -> None:
    """Every package under plugins/*/src gets one forbidden import, all in one scratch copy, and
    one ``lint-imports`` run must name each plugin as broken. One run, not one per plugin: a
    scratch copy and a run cost ~2.5 s here (more on a busy 2-core CI), ten of them ~25 s;
    and the forbidden contract reports each source package's violations apart, so one run
    with all of them shows that each plugin is covered as well as ten runs would. The plugins
    are listed from the tree, not from pyproject.toml, so a plugin the contract forgets fails
    here (test_contract_lists.py says which list to fix); the unchanged copy keeps every
    contract (test above)."""
    assert len(PLUGIN_PACKAGES) >= 10
    expected = []
    for number, name in enumerate(PLUGIN_PACKAGES):
        line, package, module = FORBIDDEN[number % len(FORBIDDEN)]
        target = _one_module(scratch / name)
        _append(target, "\n" + line)
        expected.append((name, package, f"{_module_name(scratch, target)} -> {module}"))
    done = _lint(scratch)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 kept, 1 broken" in done.stdout, done.stdout
    for name, package, edge in expected:
        assert f"{name} is not allowed to import {package}" in done.stdout, (name, done.stdout)
        assert edge in done.stdout, (edge, done.stdout)
