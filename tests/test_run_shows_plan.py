"""``cmx run`` shows the plan on a terminal before it runs anything; ``-q``, ``--json`` and a
pipe do not (#18 item 3). The terminal is a real pseudo-terminal on stderr."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

RECIPE = """
name: plan-shown
tags: [plan, shown]
summary: a shell step that says it ran
cache: false
steps:
  - uses: shell
    with: {cmd: ["sh", "-c", "echo STEP-RAN"]}
"""


def _run_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run cmx with stderr on a pseudo-terminal; stdout is a pipe. Bounded: 300 s."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "cmx_core", *args], stdout=subprocess.PIPE,
                               stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        if not ready:
            process.kill()
            raise AssertionError("cmx run did not finish within 300 s")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other end closed: cmx exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = process.communicate(timeout=60)
    os.close(master)
    return process.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def test_the_plan_is_printed_on_a_terminal_before_the_run(recipes: Callable[[str, str], Path]) -> None:
    recipes("plan-shown", RECIPE)
    code, out, err = _run_on_a_terminal(["run", "--tags=plan,shown", "--recipes", str(recipes.dir)])  # type: ignore[attr-defined]
    assert code == 0, err
    assert "plan (1 nodes" in err and "plan-shown" in err.split("plan (1 nodes", 1)[1]
    assert "cache=" in err  # the tree line: node, source, key, cache status
    assert err.index("plan (1 nodes") < err.index("done plan-shown")  # shown before it ran
    assert "COMPLETED" in out  # the summary, on stdout (the progress line no longer takes stdout over)


def test_quiet_and_json_and_a_pipe_do_not_print_the_plan(recipes: Callable[[str, str], Path]) -> None:
    recipes("plan-shown", RECIPE)
    where = ["--recipes", str(recipes.dir)]  # type: ignore[attr-defined]
    for extra in (["-q"], ["--json"]):
        code, _, err = _run_on_a_terminal(["run", "--tags=plan,shown", *where, *extra])
        assert code == 0, err
        assert "plan (" not in err
    piped = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--tags=plan,shown", *where],
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert piped.returncode == 0, piped.stderr
    assert "plan (" not in piped.stderr
