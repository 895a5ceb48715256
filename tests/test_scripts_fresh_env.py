"""scripts/test.sh runs pytest as a fresh machine would see it (#52): scripts/fresh-env.sh's
``cmx_fresh_env`` gives the run an empty TMPDIR and HOME of its own, so leftovers of earlier
runs (/tmp/ray, ~/.cache, ~/.cmx) are not seen, and the README says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fresh-env.sh"

_KEPT = ("RUSTUP_HOME", "CARGO_HOME", "PYENV_ROOT", "PIP_CONFIG_FILE")
_SEEN = ("import json, os, pathlib, tempfile; print(json.dumps({'tmp': tempfile.gettempdir(), "
         "'home': str(pathlib.Path.home()), 'fresh': os.environ['CMX_FRESH'], "
         "'unset': sorted(k for k in ('RAY_TMPDIR', 'CMX_HOME', 'XDG_CACHE_HOME') if k in os.environ), "
         f"'kept': {{k: os.environ[k] for k in {_KEPT!r} if k in os.environ}}}}))")


def _fresh(base: Path) -> dict[str, object]:
    """What a Python started after ``cmx_fresh_env`` sees, from a shell whose TMPDIR is ``base``
    and whose HOME, RAY_TMPDIR, CMX_HOME and XDG_CACHE_HOME point at an earlier run's state."""
    old = base / "old"
    for state in ("ray", ".cache", ".cmx", ".rustup", ".config/pip"):    # an earlier run's and installed tools'
        (old / state).mkdir(parents=True)
    (old / ".config/pip/pip.conf").write_text("[global]\nfind-links = /opt/wheels\n")
    env = {**{k: v for k, v in os.environ.items() if k not in _KEPT}, "TMPDIR": str(base), "HOME": str(old),
           "RAY_TMPDIR": str(old), "CMX_HOME": str(old), "XDG_CACHE_HOME": str(old)}
    script = (f'source "{SCRIPT}" && cmx_fresh_env && find "$TMPDIR" "$HOME" -mindepth 1 && '
              f'stat -c %a "$TMPDIR" "$HOME" && "{sys.executable}" -c "{_SEEN}"')
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    return {"listing_and_modes": lines[:-1], **json.loads(lines[-1])}


def test_the_run_gets_an_empty_tmpdir_and_home_of_its_own(tmp_path: Path) -> None:
    seen = _fresh(tmp_path)
    fresh = Path(str(seen["fresh"]))
    assert fresh.parent == tmp_path and fresh.name.startswith("cmx-t.")          # under the caller's TMPDIR
    assert seen["tmp"] == str(fresh / "tmp") and seen["home"] == str(fresh / "home")
    assert seen["unset"] == []                           # nothing points back at the earlier run's state
    assert seen["listing_and_modes"] == ["1777", "700"]   # both empty (nothing found in them); /tmp's mode
    assert not (fresh / "tmp" / "ray").exists()


def test_what_is_installed_in_the_old_home_still_works(tmp_path: Path) -> None:
    """rustup's toolchains and pip's index config are the machine's setup, not a run's leftovers:
    rustc (a rustup proxy) and pip find them through RUSTUP_HOME and PIP_CONFIG_FILE."""
    old = tmp_path / "old"
    assert _fresh(tmp_path)["kept"] == {"RUSTUP_HOME": str(old / ".rustup"),           # no .cargo, .pyenv there
                                        "PIP_CONFIG_FILE": str(old / ".config/pip/pip.conf")}


def test_test_sh_runs_pytest_in_the_fresh_environment_and_removes_it() -> None:
    text = (ROOT / "scripts" / "test.sh").read_text()
    assert "source scripts/fresh-env.sh\n" in text and '${CMX_FRESH:+"$CMX_FRESH"}' in text   # removed at exit
    call = text.index("\ncmx_fresh_env\n")
    assert call < text.index("-m pytest") and text.index("bash scripts/install.sh") < call
    assert "TMPDIR" not in text[call:]                   # nothing after it points pytest elsewhere


def test_the_readme_and_contributing_say_the_suite_runs_as_on_a_fresh_machine() -> None:
    readme = (ROOT / "README.md").read_text()
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for doc in (readme, contributing):
        assert "private, empty `TMPDIR` and `HOME`" in doc and "scripts/fresh-env.sh" in doc
