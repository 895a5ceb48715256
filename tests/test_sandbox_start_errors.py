"""Where the sandbox cannot start at all, one line says what to install or set (#36 item 2):
bubblewrap missing (for real: a PATH without it, through the documented MLE-bench command),
and unprivileged user namespaces restricted (the kernel settings, from recorded values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.sandbox import bubblewrap


def test_a_missing_bwrap_is_one_line_that_says_what_to_install(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "CMX_HOME": str(tmp_path / "home"), "CMX_LOAD_PLUGINS": "mlebench"}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=mle-bench,run",
                           "--competition=sklearn-diabetes", "--seeds=1",
                           "--agent-cmd=python /mlebench/baselines/baseline.py"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cmx: error:")]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(errors) == 1, proc.stderr
    assert errors[0].endswith("sandbox 'bubblewrap' cannot run here: bwrap is not installed; install the "
                              "bubblewrap package (apt-get install -y bubblewrap)")
    assert "seed 0: error" not in proc.stderr  # refused once, before any seed ran


@pytest.mark.parametrize(("name", "value", "fix"), [
    ("apparmor_restrict_unprivileged_userns", "1", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
    ("unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"),
    ("max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
])
def test_restricted_user_namespaces_say_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                    value: str, fix: str) -> None:
    """The kernel files as a restricted host has them (an Ubuntu 24.04 host with AppArmor's
    restriction on has apparmor_restrict_unprivileged_userns = 1)."""
    knobs = {}
    for path, (bad, how) in bubblewrap.USERNS_KNOBS.items():
        recorded = tmp_path / Path(path).name
        recorded.write_text(f"{value if recorded.name == name else ('0' if bad == '1' else '1')}\n")
        knobs[str(recorded)] = (bad, how)
    monkeypatch.setattr(bubblewrap, "USERNS_KNOBS", knobs)
    bubblewrap._userns_problem.cache_clear()
    try:
        why = bubblewrap._userns_problem()
    finally:
        bubblewrap._userns_problem.cache_clear()
    assert why is not None and why.startswith("unprivileged user namespaces are restricted (")
    assert f"{name} is {value}); run as root or {fix}" in why
