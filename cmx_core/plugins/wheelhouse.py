"""``cmx plugins wheelhouse DIR``: a folder of wheels from which a plugin's development venv
gets cmx-core, which is not on the package index: cmx-core's wheel, built from the checkout
this cmx runs from, and the wheels of what it needs (``pip download``, from the index or
pip's cache), with any extra requirements (``--with pytest`` for a plugin's ``test`` extra).
Made once where an index is reachable; the venv then installs with ``--find-links DIR``,
offline too (``PIP_NO_INDEX=1``). docs/plugins.md, "A development venv"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.plugins.install import PIP
from cmx_core.plugins.local_source import project_name

RunPip = Callable[[list[str]], None]


def core_checkout() -> Path:
    """The checkout cmx-core is imported from (the folder holding its ``pyproject.toml``); a
    UsageError when it runs from an installed wheel, which cannot be built again."""
    import cmx_core  # deferred: the package's own location, only when asked

    root = Path(cmx_core.__file__).resolve().parents[1]
    if project_name(root) != "cmx-core":
        raise UsageError(f"cmx plugins wheelhouse: cmx-core runs from {root}, not from a checkout (no pyproject.toml "
                         "naming cmx-core): run it with the cmx of a checkout (CHECKOUT/.venv/bin/cmx)")
    return root


def build(directory: Path, extra: Sequence[str], run_pip: RunPip) -> list[Path]:
    """Fill ``directory`` with cmx-core's wheel and the wheels it and ``extra`` need; the
    wheels there afterwards, sorted."""
    root = core_checkout()
    directory.mkdir(parents=True, exist_ok=True)
    before = set(directory.glob("cmx_core-*.whl"))
    run_pip([*PIP, "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-build-isolation",
             "--wheel-dir", str(directory), str(root)])
    made = sorted(set(directory.glob("cmx_core-*.whl")) - before) or sorted(directory.glob("cmx_core-*.whl"))
    if not made:
        raise UsageError(f"cmx plugins wheelhouse: pip wrote no cmx-core wheel into {directory}")
    run_pip([*PIP, "download", "--quiet", "--disable-pip-version-check", "--dest", str(directory), str(made[-1]),
             *extra])
    return sorted(directory.glob("*.whl"))
