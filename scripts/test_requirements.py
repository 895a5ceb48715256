"""Print the test tools of cmx-core and the in-tree plugins (each pyproject.toml's ``test``
extra), one requirement a line, each once: what scripts/install.sh adds to an install that
scripts/benchmark.sh made, instead of installing everything again. Exits 1 where Python has
no tomllib (3.10): the install script then installs everything."""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    try:
        import tomllib
    except ModuleNotFoundError:
        return 1
    root = Path(__file__).resolve().parents[1]
    seen: dict[str, None] = {}
    for pyproject in [root / "pyproject.toml", *sorted(root.glob("plugins/*/pyproject.toml"))]:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        for requirement in project.get("optional-dependencies", {}).get("test", []):
            seen.setdefault(str(requirement), None)
    print("\n".join(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
