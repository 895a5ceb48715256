"""Write import-linter's package lists in pyproject.toml from the plugins in the tree, so the
contract covers every plugin by construction: ``root_packages`` is cmx_core and every package
``plugins/*/src/<name>/__init__.py``; the ``plugins-public-api`` contract's ``source_modules``
is every such plugin package.

    .venv/bin/python scripts/importlinter_lists.py            # print the two lists
    .venv/bin/python scripts/importlinter_lists.py --check    # exit 1 when pyproject.toml disagrees
    .venv/bin/python scripts/importlinter_lists.py --write    # rewrite them in pyproject.toml

Only the two lists' text changes (the rest of the file, comments included, is kept).
tests/test_contract_lists.py fails when pyproject.toml disagrees with the tree.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PUBLIC_API_CONTRACT = "plugins-public-api"


def plugin_packages(repo: Path) -> list[str]:
    """Every plugin's top-level package, sorted: ``plugins/*/src/<name>/__init__.py``."""
    return sorted(init.parent.name for init in repo.glob("plugins/*/src/*/__init__.py"))


def render(key: str, names: list[str]) -> str:
    """``key = [`` then the quoted names, wrapped at 100 columns, then ``]``."""
    body = textwrap.fill(", ".join(f'"{name}"' for name in names) + ",", width=100, initial_indent="  ",
                         subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
    return f"{key} = [\n{body}\n]"


def _replace_list(text: str, start: int, key: str, names: list[str]) -> str:
    """``text`` with the first ``key = [...]`` at or after ``start`` replaced by the rendered list."""
    found = re.compile(rf"^{re.escape(key)} = \[[^\]]*\]", re.MULTILINE).search(text, start)
    if found is None:
        raise SystemExit(f"pyproject.toml: no `{key} = [...]` after offset {start}")
    return text[:found.start()] + render(key, names) + text[found.end():]


def rewritten(text: str, plugins: list[str]) -> str:
    """pyproject.toml's ``text`` with both lists drawn from ``plugins``."""
    table = text.find("[tool.importlinter]\n")
    contract = text.find(f'id = "{PUBLIC_API_CONTRACT}"\n')
    if table < 0 or contract < 0:
        raise SystemExit(f"pyproject.toml: no [tool.importlinter] table or no {PUBLIC_API_CONTRACT!r} contract")
    text = _replace_list(text, table, "root_packages", ["cmx_core", *plugins])
    contract = text.find(f'id = "{PUBLIC_API_CONTRACT}"\n')
    return _replace_list(text, contract, "source_modules", plugins)


def main(argv: list[str]) -> int:
    pyproject = REPO / "pyproject.toml"
    plugins = plugin_packages(REPO)
    text = pyproject.read_text(encoding="utf-8")
    wanted = rewritten(text, plugins)
    if argv[1:] == ["--write"]:
        pyproject.write_text(wanted, encoding="utf-8")
        return 0
    if argv[1:] == ["--check"]:
        if wanted != text:
            print("pyproject.toml's import-linter lists differ from plugins/*/src; run: "
                  ".venv/bin/python scripts/importlinter_lists.py --write", file=sys.stderr)
            return 1
        return 0
    print(render("root_packages", ["cmx_core", *plugins]))
    print(render("source_modules", plugins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
