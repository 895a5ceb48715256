"""Plugin tests reach cmx_core as plugin authors do: through ``cmx_core.api``,
``cmx_core.errors`` and ``cmx_core.testing`` only (scripts/plugin_test_imports.py finds the
other imports, at any depth). What a plugin's tests need beyond the api is re-exported on
purpose in a ``cmx_core.testing`` submodule (``runs``, ``cli``, ``registry``, ``results``...)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("plugin_test_imports", REPO / "scripts" / "plugin_test_imports.py")
assert _SPEC is not None and _SPEC.loader is not None
scan = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = scan  # dataclasses look their module up there
_SPEC.loader.exec_module(scan)


def private_imports(repo: Path) -> list[str]:
    """``path:line module`` of each private cmx_core import in ``repo``'s plugin tests."""
    return [f"{item.path}:{item.line} {item.module}" for item in scan.all_private_imports(repo)]


def test_plugin_tests_import_no_private_core_module() -> None:
    found = private_imports(REPO)
    assert not found, "import these through cmx_core.api, cmx_core.errors or cmx_core.testing:\n" + "\n".join(
        f"  {line}" for line in found)


def test_the_check_fails_on_a_plugin_test_with_a_private_import(tmp_path: Path) -> None:
    tests = tmp_path / "plugins" / "x" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_public.py").write_text(
        "from cmx_core import api, errors\n"
        "from cmx_core.api import plan\n"
        "from cmx_core.errors import UsageError\n"
        "from cmx_core.testing import cmx_home\n"
        "from cmx_core.testing.runs import engine\n")
    assert private_imports(tmp_path) == []
    (tests / "deep").mkdir()
    (tests / "deep" / "test_private.py").write_text("def test_it():\n    from cmx_core.run import engine\n")
    assert private_imports(tmp_path) == ["plugins/x/tests/deep/test_private.py:2 cmx_core.run"]


def shadowed(package: Path) -> list[str]:
    """Submodules of ``package`` named like a name its ``__init__`` binds: importing
    ``package.X`` sets the package's attribute ``X``, which would replace the ``__init__``'s
    own ``X`` (the kit's ``engine`` and ``plugins`` are core modules it uses)."""
    bound: set[str] = set()
    for node in ast.parse((package / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {target.id for target in targets if isinstance(target, ast.Name)}
    return sorted(path.stem for path in package.glob("*.py") if path.stem in bound)


def test_no_kit_submodule_shadows_a_name_of_the_kit(tmp_path: Path) -> None:
    assert shadowed(REPO / "cmx_core" / "testing") == []
    (tmp_path / "__init__.py").write_text("from cmx_core.run import engine\n"
                                          "from cmx_core.plugins import loader as plugins\n")
    for name in ("engine", "plugins", "runs"):
        (tmp_path / f"{name}.py").write_text("")
    assert shadowed(tmp_path) == ["engine", "plugins"]


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
