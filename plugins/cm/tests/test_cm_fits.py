"""``cmx import cm`` and ``cmx cm run|explain script`` at 80 columns, stdout piped (#50): no
line over 80 but a whole word or command to copy, no word split, ``--wide`` accepted and
forwarded (the checker is cmx-core's, :mod:`cmx_core.testing.fits`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.testing.fits import assert_fits

NARROW = {"COLUMNS": "80"}


def test_import_cm_and_cm_script_fit_80_columns(collection: Path, tmp_path: Path,
                                                 cmx_cli: Callable[..., Any]) -> None:
    out = tmp_path / "a-folder-of-imported-recipes-whose-path-is-long-enough-to-wrap"
    said = {}
    for extra in ((), ("--wide",)):
        done = cmx_cli("import", "cm", str(collection), "--out", str(out), *extra, env=NARROW)
        assert done.returncode == 0, done.stderr
        said[extra] = done.stdout
    assert_fits(said[()], 80, wide=said[("--wide",)], what="cmx import cm")
    assert any(len(line) > 80 for line in said[("--wide",)].splitlines())  # the wide run is one line each
    explained = {}
    for extra in ((), ("--wide",)):
        done = cmx_cli("cm", "explain", "script", "--tags=demo,tool", "--recipes", str(out), *extra, env=NARROW)
        assert done.returncode == 0, done.stderr
        explained[extra] = done.stdout
    assert_fits(explained[()], 80, wide=explained[("--wide",)], what="cmx cm explain script")
    ran = cmx_cli("cm", "run", "script", "--tags=demo,tool", "--recipes", str(out), env=NARROW)
    assert ran.returncode == 0, ran.stderr
    assert_fits(ran.stdout, 80, what="cmx cm run script")
    assert ran.stdout.splitlines()[-1].startswith("result: ")  # the run summary, last line for scripts
