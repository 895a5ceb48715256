"""``cmx import ale-bench`` (and ``cmx ale-bench import``) at 80 columns, stdout piped (#50):
the line naming where a problem went wraps at its spaces, ``--wide`` keeps it whole (the
checker is cmx-core's, :mod:`cmx_core.testing.fits`). cmx001 has Python tools: no build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cmx_alebench.problem import shipped_dir
from cmx_core.testing.fits import assert_fits


def _cmx(home: Path, *args: str) -> str:
    env = {**os.environ, "CMX_HOME": str(home), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_ale_bench_fits_80_columns(tmp_path: Path) -> None:
    dest = tmp_path / "a-problem-folder-with-a-name-long-enough-to-need-wrapping-at-80-columns"
    for words in (("import", "ale-bench"), ("ale-bench", "import")):
        args = (*words, str(shipped_dir() / "cmx001"), "--dest", str(dest))
        narrow, wide = _cmx(tmp_path, *args), _cmx(tmp_path, *args, "--wide")
        assert_fits(narrow, 80, wide=wide, what=f"cmx {' '.join(words)}")
        assert "cmx001: python tools" in narrow and len(wide.splitlines()) == 1
