"""``cmx detect`` at 80 columns, stdout piped (#50): its facts table fits (a long summary cut
with an ellipsis and announced), no word split, ``--wide`` one line a fact. Checked on a
recorded machine (an 8-GPU H100 server, whose summaries run long) and on this one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.testing.fits import assert_fits


def _detect(home: Path, *args: str) -> str:
    env = {**os.environ, "CMX_HOME": str(home), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "cmx_core", "detect", *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("source", [("--replay", "h100-sxm-8x"), ()], ids=["recorded-h100", "this-machine"])
def test_detect_fits_80_columns(tmp_path: Path, source: tuple[str, ...]) -> None:
    narrow, wide = _detect(tmp_path, *source), _detect(tmp_path, *source, "--wide")
    assert_fits(narrow, 80, wide=wide, what=f"cmx detect {' '.join(source)}")
    assert len(narrow.splitlines()) <= len(wide.splitlines()) + 2  # one line a fact (plus a footer)
