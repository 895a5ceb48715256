"""Helpers of cmx-cm's tests (a module of its own so other plugins' conftest files cannot shadow it)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any


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


def outputs(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    document = json.loads(proc.stdout)
    result: dict[str, Any] = document["outputs"]
    return result
