"""Helpers of cmx-cm's tests (a module of its own so other plugins' conftest files cannot shadow it)."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_script(root: Path, alias: str, meta: str, customize: str = "", run_sh: str = "",
                 meta_file: str = "_cm.yaml") -> Path:
    directory = root / alias
    directory.mkdir(parents=True)
    (directory / meta_file).write_text(textwrap.dedent(meta))
    if customize:
        (directory / "customize.py").write_text(textwrap.dedent(customize))
    if run_sh:
        (directory / "run.sh").write_text("#!/bin/bash\n" + textwrap.dedent(run_sh))
    return directory
