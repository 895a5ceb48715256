"""CM's and MLC's command words get the cmx command that does the same (#50 item 5), and
each command named in a hint is one cmx has; a reader that closes the pipe early ends cmx
quietly (exit 141, as a shell reports for ``ls | head``), with no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.cli.parser import CM_WORDS

CMX = [sys.executable, "-m", "cmx_core"]
WORDS = [["pull", "repo", "URL"], ["find", "cache"], ["search", "script"], ["rm", "cache"], ["show", "script", "x"],
         ["docker", "script"]]


def _cmx(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMX, *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "CMX_HOME": str(home)})


@pytest.mark.parametrize("words", WORDS, ids=lambda w: " ".join(w))
def test_a_cm_word_names_the_cmx_command(words: list[str], tmp_path: Path) -> None:
    proc = _cmx(words, tmp_path)
    hint = CM_WORDS[words[0] if words[0] != "show" else "script"]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert hint in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("command", sorted({c for hint in CM_WORDS.values()
                                            for c in re.findall(r"'(cmx [^']*)'", hint)}))
def test_every_command_a_hint_names_is_a_cmx_command(command: str, tmp_path: Path) -> None:
    words = [w for w in command.split()[1:] if not w.isupper() and not w.startswith("--")]  # no placeholders
    proc = _cmx([*words, "--help"], tmp_path)
    assert proc.returncode == 0, (command, proc.stderr)


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before cmx writes (as `| head -0`)
    proc = subprocess.run([*CMX, "list", "recipes"], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=120,
                          check=False, env={**os.environ, "CMX_HOME": str(tmp_path)})
    os.close(writer)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr
