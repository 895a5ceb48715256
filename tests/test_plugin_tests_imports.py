"""Plugin tests reach cmx_core as plugin authors do: through ``cmx_core.api``,
``cmx_core.errors`` and ``cmx_core.testing`` only (scripts/plugin_test_imports.py finds the
other imports, at any depth). The imports made before this rule are listed in
tests/plugin_tests_private_imports.txt; that list only shrinks: a new private import fails,
and so does an entry no test needs any more."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("plugin_test_imports", REPO / "scripts" / "plugin_test_imports.py")
assert _SPEC is not None and _SPEC.loader is not None
scan = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = scan  # dataclasses look their module up there
_SPEC.loader.exec_module(scan)


def test_plugin_tests_import_no_private_core_module_beyond_the_allow_list() -> None:
    found = scan.all_private_imports(REPO)
    allowed = scan.read_allow_list(scan.ALLOW_LIST)
    new = [item for item in found if (item.path, item.module) not in allowed]
    assert not new, "import these through cmx_core.api, cmx_core.errors or cmx_core.testing:\n" + "\n".join(
        f"  {item.path}:{item.line} {item.module}" for item in new)


def test_the_allow_list_only_shrinks() -> None:
    stale = scan.read_allow_list(scan.ALLOW_LIST) - scan.pairs(scan.all_private_imports(REPO))
    assert not stale, "no test imports these any more; delete their lines from " \
                      f"{scan.ALLOW_LIST.name}:\n" + "\n".join(f"  {p} {m}" for p, m in sorted(stale))


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    test = tmp_path / "plugins" / "x" / "tests" / "test_x.py"
    test.parent.mkdir(parents=True)
    test.write_text(
        "import cmx_core.run.engine\n"
        "from cmx_core import api, paths\n"
        "from cmx_core.errors import UsageError\n"
        "from cmx_core.testing.chaos import chaos_problems\n"
        "from cmx_core.results.store import ResultStore, other\n"
        "def test_it():\n"
        "    from cmx_core.plugins.loader import get_registry\n")
    found = scan.all_private_imports(tmp_path)
    assert [(item.line, item.module, item.names) for item in found] == [
        (1, "cmx_core.run.engine", ()), (2, "cmx_core.paths", ()),
        (5, "cmx_core.results.store", ("ResultStore", "other")), (7, "cmx_core.plugins.loader", ("get_registry",))]
    assert scan.names_by_module(found)["cmx_core.results.store"] == {"ResultStore", "other"}
