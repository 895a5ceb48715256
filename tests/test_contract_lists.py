"""The lists in pyproject.toml that name packages cover every plugin under ``plugins/*/src``:
import-linter's ``root_packages`` and the ``plugins-public-api`` contract's ``source_modules``
(written by scripts/importlinter_lists.py), ruff's ``src`` and ``known-first-party``, and
mypy's ``files``. A plugin left out of the import contract is a plugin whose forbidden imports
``lint-imports`` never sees (as cmx_train once was)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "importlinter_lists.py"
PLUGIN_SRCS = sorted(init.parent.parent for init in REPO.glob("plugins/*/src/*/__init__.py"))
PLUGINS = sorted(init.parent.name for init in REPO.glob("plugins/*/src/*/__init__.py"))


def _config() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _public_api_contract(config: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "plugins-public-api")


def test_the_tree_has_the_plugins_we_expect() -> None:
    assert len(PLUGINS) >= 10 and "cmx_train" in PLUGINS and "cmx_slurm" in PLUGINS


def test_import_linter_roots_are_cmx_core_and_every_plugin() -> None:
    assert sorted(_config()["tool"]["importlinter"]["root_packages"]) == sorted(["cmx_core", *PLUGINS]), \
        "run: .venv/bin/python scripts/importlinter_lists.py --write"


def test_the_public_api_contract_covers_every_plugin() -> None:
    assert sorted(_public_api_contract(_config())["source_modules"]) == PLUGINS, \
        "run: .venv/bin/python scripts/importlinter_lists.py --write"


def test_the_script_agrees_with_pyproject() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_script_adds_a_plugin_the_lists_lack(tmp_path: Path) -> None:
    """A scratch tree with one more plugin: --check fails, --write adds it to both lists and
    keeps the rest of the file."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / SCRIPT.name)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for src in PLUGIN_SRCS:
        for init in src.glob("*/__init__.py"):
            package = tmp_path / init.parent.relative_to(REPO)
            package.mkdir(parents=True)
            (package / "__init__.py").touch()
    (tmp_path / "plugins" / "zzz" / "src" / "cmx_zzz").mkdir(parents=True)
    (tmp_path / "plugins" / "zzz" / "src" / "cmx_zzz" / "__init__.py").touch()
    script = [sys.executable, str(tmp_path / "scripts" / SCRIPT.name)]
    assert subprocess.run([*script, "--check"], capture_output=True, timeout=60).returncode == 1
    subprocess.run([*script, "--write"], check=True, timeout=60)
    config = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))
    assert sorted(config["tool"]["importlinter"]["root_packages"]) == sorted(["cmx_core", *PLUGINS, "cmx_zzz"])
    assert sorted(_public_api_contract(config)["source_modules"]) == sorted([*PLUGINS, "cmx_zzz"])
    assert config["tool"]["importlinter"]["contracts"][0] == _config()["tool"]["importlinter"]["contracts"][0]
    assert config["tool"]["ruff"] == _config()["tool"]["ruff"]
    assert subprocess.run([*script, "--check"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("src", PLUGIN_SRCS, ids=lambda src: src.parent.name)
def test_ruff_and_mypy_see_every_plugin(src: Path) -> None:
    config = _config()
    where = str(src.relative_to(REPO))
    assert where in config["tool"]["ruff"]["src"], "add it to [tool.ruff] src"
    assert where in config["tool"]["mypy"]["files"], "add it to [tool.mypy] files"
    first_party = config["tool"]["ruff"]["lint"]["isort"]["known-first-party"]
    for init in src.glob("*/__init__.py"):
        assert init.parent.name in first_party, "add it to [tool.ruff.lint.isort] known-first-party"
