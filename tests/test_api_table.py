"""cmx_core.api comes from one table (issue 42 item 6): ``cmx_core/api/table.py`` lists every
name by group; the lazy lookup and ``__all__`` are built from it, and the type checkers'
import block is written from it by ``scripts/api_table.py`` (checked here)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core import api
from cmx_core.api import table

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "api_table.py"


def _script() -> object:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        return importlib.import_module("api_table")
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_the_type_checking_block_is_written_from_the_table() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_a_block_that_lost_or_gained_a_name() -> None:
    script = _script()
    text = (REPO / "cmx_core" / "api" / "__init__.py").read_text(encoding="utf-8")
    written = script.written(text)
    assert written == set(table.entries())
    assert ("cmx_core.providers.types", "StepType", "StepType") in written
    lost = text.replace("        StepType as StepType,\n", "")
    assert script.written(lost) == written - {("cmx_core.providers.types", "StepType", "StepType")}


def test_every_name_of_the_table_is_exported_once_and_resolves_to_its_module() -> None:
    names = [name for _, _, name in table.entries()]
    assert len(names) == len(set(names)), "a name is listed twice"
    assert api.__all__ == names
    for module, attribute, name in table.entries():
        assert getattr(api, name) is getattr(importlib.import_module(module), attribute), name
    assert api.run is importlib.import_module("cmx_core.run.engine").run_tags  # "run_tags as run"


def test_a_name_outside_the_table_is_no_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'get_registry'"):
        api.get_registry  # noqa: B018 - the service locator is not public (plugins are handed the registry)


def test_helpers_outside_the_contract_live_in_submodules_not_in_the_api() -> None:
    from cmx_core.api import archives, display, sandboxing

    for module in (display, archives, sandboxing):
        exported = {name for name in vars(module) if not name.startswith("_") and name != "annotations"}
        assert exported, module.__name__
        assert not exported & set(api.__all__), module.__name__
    assert {"Grid", "fmt_number"} <= set(vars(display)) and "extract_all" in vars(archives)
    assert "BubblewrapSession" in vars(sandboxing)
