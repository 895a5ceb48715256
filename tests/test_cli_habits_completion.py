"""``cmx completion bash|zsh|fish`` prints a script; the bash one completes commands, recipe
names and tags for real in bash (#18 item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _complete(script: str, words: list[str]) -> list[str]:
    bin_dir = str(Path(sys.executable).parent)
    program = (f"{script}\nCOMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; _cmx; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_commands_names_and_tags(cli: Callable[..., Any]) -> None:
    script = cli("completion", "bash").out
    assert "complete -o default -o nospace -F _cmx cmx" in script
    assert "results" in _complete(script, ["cmx", "res"])
    assert "demo-sort" in _complete(script, ["cmx", "run", "demo-s"])
    assert "--tags=demo" in _complete(script, ["cmx", "run", "--tags=dem"])


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "bashcompinit"), ("fish", "complete -c cmx")])
def test_other_shells(cli: Callable[..., Any], shell: str, marker: str) -> None:
    result = cli("completion", shell)
    assert result.code == 0 and marker in result.out and "run" in result.out


def test_unknown_shell_is_refused(cli: Callable[..., Any]) -> None:
    result = cli("completion", "tcsh")
    assert result.code == 2 and "invalid choice: 'tcsh'" in result.err
