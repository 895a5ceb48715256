"""The imports of cmx_core's private modules in the plugins' tests (``plugins/*/tests``).

A plugin's tests reach cmx_core as a plugin author's would: through ``cmx_core.api``,
``cmx_core.errors`` and ``cmx_core.testing`` (and its submodules) only. Every other
``cmx_core.X`` a test imports (at module level or inside a function) is private: import it
through the api, or re-export it on purpose in a ``cmx_core.testing`` submodule.

    .venv/bin/python scripts/plugin_test_imports.py            # print each private import
    .venv/bin/python scripts/plugin_test_imports.py --names    # the private names, per module

tests/test_plugin_tests_imports.py fails on any private import.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PUBLIC = ("cmx_core.api", "cmx_core.errors", "cmx_core.testing")


@dataclass(frozen=True)
class PrivateImport:
    """One private cmx_core module imported by a plugin test, and the names taken from it."""

    path: str
    line: int
    module: str
    names: tuple[str, ...]


def is_public(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in PUBLIC)


def _imports(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(cmx_core module, names taken from it) of one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "cmx_core" or alias.name.startswith("cmx_core."):
                yield alias.name, ()
    elif node.level == 0 and node.module == "cmx_core":
        for alias in node.names:  # `from cmx_core import paths` takes the module cmx_core.paths
            yield f"cmx_core.{alias.name}", ()
    elif node.level == 0 and node.module is not None and node.module.startswith("cmx_core."):
        yield node.module, tuple(alias.name for alias in node.names)


def private_imports(path: Path, where: str) -> list[PrivateImport]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [PrivateImport(where, node.lineno, module, names) for module, names in _imports(node)
                      if not is_public(module)]
    return found


def plugin_tests(repo: Path) -> list[Path]:
    return sorted(repo.glob("plugins/*/tests/**/*.py"))


def all_private_imports(repo: Path) -> list[PrivateImport]:
    found = []
    for path in plugin_tests(repo):
        found += private_imports(path, str(path.relative_to(repo)))
    return found


def names_by_module(found: list[PrivateImport]) -> dict[str, set[str]]:
    """Private module -> the names plugin tests take from it (``*`` for the module itself)."""
    names: dict[str, set[str]] = defaultdict(set)
    for item in found:
        names[item.module].update(item.names or ("*",))
    return dict(names)


def main(argv: list[str]) -> int:
    found = all_private_imports(REPO)
    if argv[1:] == ["--names"]:
        for module, names in sorted(names_by_module(found).items()):
            print(f"{module}: {', '.join(sorted(names))}")
        return 0
    for item in found:
        print(f"{item.path}:{item.line} {item.module} {', '.join(item.names)}".rstrip())
    print(f"{len(found)} private imports in {len({item.path for item in found})} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
