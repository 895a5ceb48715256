"""The imports of cmx_core's private modules in the plugins' tests (``plugins/*/tests``).

A plugin's tests reach cmx_core as a plugin author's would: through ``cmx_core.api``,
``cmx_core.errors`` and ``cmx_core.testing`` (and its submodules) only. Every other
``cmx_core.X`` a test imports (at module level or inside a function) is private.

    .venv/bin/python scripts/plugin_test_imports.py            # print each private import
    .venv/bin/python scripts/plugin_test_imports.py --names    # the private names, per module
    .venv/bin/python scripts/plugin_test_imports.py --write    # rewrite the allow-list

tests/test_plugin_tests_imports.py fails on a private import the allow-list
(tests/plugin_tests_private_imports.txt) lacks, and on an entry that is no longer needed:
the list only shrinks.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ALLOW_LIST = REPO / "tests" / "plugin_tests_private_imports.txt"
PUBLIC = ("cmx_core.api", "cmx_core.errors", "cmx_core.testing")
HEADER = """\
# Temporary: plugin tests that still import a private cmx_core module, one `path module` a line.
# Plugin tests may reach core only through cmx_core.api, cmx_core.errors and cmx_core.testing.
# This list must only shrink: never add to it; move what a test needs into cmx_core.testing
# (or the api) and drop the line. Written by: .venv/bin/python scripts/plugin_test_imports.py --write
"""


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


def pairs(found: list[PrivateImport]) -> set[tuple[str, str]]:
    """(test file, private module): the allow-list's granularity."""
    return {(item.path, item.module) for item in found}


def read_allow_list(path: Path) -> set[tuple[str, str]]:
    entries = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            where, module = line.split()
            entries.add((where, module))
    return entries


def names_by_module(found: list[PrivateImport]) -> dict[str, set[str]]:
    """Private module -> the names plugin tests take from it (``*`` for the module itself)."""
    names: dict[str, set[str]] = defaultdict(set)
    for item in found:
        names[item.module].update(item.names or ("*",))
    return dict(names)


def main(argv: list[str]) -> int:
    found = all_private_imports(REPO)
    if argv[1:] == ["--write"]:
        ALLOW_LIST.write_text(HEADER + "".join(f"{p} {m}\n" for p, m in sorted(pairs(found))), encoding="utf-8")
        return 0
    if argv[1:] == ["--names"]:
        for module, names in sorted(names_by_module(found).items()):
            print(f"{module}: {', '.join(sorted(names))}")
        return 0
    for item in found:
        print(f"{item.path}:{item.line} {item.module} {', '.join(item.names)}".rstrip())
    print(f"{len(found)} private imports in {len({item.path for item in found})} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
