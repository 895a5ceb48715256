"""scripts/install.sh skips everything when nothing changed and says each phase (#18 item 6).

It runs against a copy of the script in a scratch tree whose ``.venv/bin/python`` is a stand-in
that records its arguments (the real pip is not run: no network, no minutes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = ("#!/bin/sh\ncase \"$1\" in *test_requirements.py) exec python3 \"$@\";; esac\n"
            "echo \"$@\" >> \"$(dirname \"$0\")/../calls.txt\"\n")
"""pip's stand-in; the listing of the test tools runs for real (it only reads pyproject files)."""


PLUGIN = "[project]\nname = 'p'\n[project.optional-dependencies]\ntest = ['pytest>=8', 'pyyaml>=6']\n"


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    shutil.copy(ROOT / "scripts" / "test_requirements.py", tmp_path / "scripts" / "test_requirements.py")
    shutil.copy(ROOT / "constraints.txt", tmp_path / "constraints.txt")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "plugins" / "p").mkdir(parents=True)
    (tmp_path / "plugins" / "p" / "pyproject.toml").write_text(PLUGIN)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN)
    python.chmod(0o755)
    return tmp_path


def _install(tree: Path, *args: str) -> str:
    env = {**os.environ, "CMX_INSTALL_NO_APT": "1"}
    done = subprocess.run(["bash", str(tree / "scripts" / "install.sh"), *args], capture_output=True, text=True,
                          timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _calls(tree: Path) -> list[str]:
    path = tree / ".venv" / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_second_install_is_skipped_until_a_pyproject_changes(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    first = _install(tree)
    assert "1/2 pip and torch" in first and "2/2 cmx-core" in first and re.search(r"done in \d+ s", first)
    assert len(_calls(tree)) == 2 and all("-q" not in c.split() for c in _calls(tree))
    # both installs resolve under constraints.txt: its CPU torch, not the newest CUDA build
    assert all("-c constraints.txt" in c for c in _calls(tree)) and _calls(tree)[0].endswith(" pip torch")
    second = _install(tree)
    assert "up to date" in second and len(_calls(tree)) == 2
    (tree / "plugins" / "p" / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '2'\n")
    assert "2/2 cmx-core" in _install(tree) and len(_calls(tree)) == 4


def test_a_test_install_satisfies_the_main_job_and_the_reverse_adds_the_test_tools(tmp_path: Path) -> None:
    """One stamp for both modes (#36 item 6): scripts/benchmark.sh (a plain install) right after
    scripts/test.sh (a --test install) installs nothing; a test install after a plain one adds
    the test tools only."""
    tree = _tree(tmp_path)
    assert "2/2 cmx-core" in _install(tree, "--test") and len(_calls(tree)) == 2
    assert "[test]" in _calls(tree)[1]
    assert "up to date" in _install(tree) and len(_calls(tree)) == 2
    plain = _tree(tmp_path / "plain")
    _install(plain)
    # #50 item 2: the test install after a plain one adds only the test tools (the extras'
    # requirements), not every package again
    added = _install(plain, "--test")
    assert "adding the test tools" in added and "2/2 cmx-core" not in added and len(_calls(plain)) == 3
    assert _calls(plain)[2].endswith("-m pip install --progress-bar off -c constraints.txt pytest>=8 pyyaml>=6")
    assert "up to date" in _install(plain) and "up to date" in _install(plain, "--test")


def test_benchmark_and_test_scripts_use_the_same_install() -> None:
    assert "bash scripts/install.sh\n" in (ROOT / "scripts" / "benchmark.sh").read_text()
    assert "bash scripts/install.sh --test\n" in (ROOT / "scripts" / "test.sh").read_text()


def test_a_changed_constraint_installs_again(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    _install(tree)
    (tree / "constraints.txt").write_text("torch==2.13.1\n")
    assert "2/2 cmx-core" in _install(tree) and len(_calls(tree)) == 4
