"""Helpers of cmx-cm's tests (a module of its own so other plugins' conftest files cannot shadow it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest


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


def pinned_venv(root: Path, requirements: Sequence[str]) -> Path:
    """A virtual environment at ``root`` holding exactly ``requirements`` (``name==version``:
    CM's or MLC's own code, never installed beside cmx), made once and kept; the test fails if
    it cannot be made."""
    python = root / "bin" / "python"
    pins = dict(r.split("==", 1) for r in requirements)
    probe = [str(python), "-c", "import importlib.metadata as m, sys; print([m.version(n) for n in sys.argv[1:]])",
             *pins]
    if python.exists() and subprocess.run(probe, capture_output=True, text=True,
                                          check=False).stdout.strip() == str(list(pins.values())):
        return root
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True, timeout=300)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements], capture_output=True, text=True,
                          timeout=900, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot install {' '.join(requirements)} into {root}: {done.stderr[-500:]}")
    return root


ENVP_KEYS = ("META", "VAR", "DEFAULT", "GROUP", "FREE")
"""The env keys of the precedence scripts: set by envp-leaf's own ``env``, its variation ``v``'s,
its ``default_env``, group ``g``'s default ``d``'s, and by nothing of envp-leaf's."""


def precedence_scripts(root: Path, prefix: str, head: str, callers: Sequence[tuple[str, str, str]],
                       meta_file: str = "_cm.yaml") -> None:
    """envp-leaf and its callers: each caller ``(alias, dep kind, dep tags)`` hands it every key
    of :data:`ENVP_KEYS` set to ``caller`` in a dep's ``env``; envp-leaf reports what it saw as
    ``<prefix>_ENVP_SEEN_<KEY>``. ``head`` is the metadata's uid lines, with ``{uid}`` in it."""
    echo = " ".join(f"{prefix}_ENVP_SEEN_{k}=${{{prefix}_ENVP_{k}:-unset}}" for k in ENVP_KEYS)
    write_script(root, "envp-leaf", f"alias: envp-leaf\n{head.format(uid='f6' * 8)}tags: [envpleaf]\n"
                                    f"new_env_keys: [{prefix}_ENVP_SEEN_*]\nenv: {{{prefix}_ENVP_META: meta}}\n"
                                    f"default_env: {{{prefix}_ENVP_DEFAULT: default}}\n"
                                    f"variations:\n  v: {{env: {{{prefix}_ENVP_VAR: variation}}}}\n"
                                    f"  d: {{group: g, default: true, env: {{{prefix}_ENVP_GROUP: d}}}}\n"
                                    "  e: {group: g}\n",
                 run_sh=f'for kv in {echo}; do echo "$kv"; done > tmp-run-env.out\n', meta_file=meta_file)
    dep_env = "{" + ", ".join(f"{prefix}_ENVP_{k}: caller" for k in ENVP_KEYS) + "}"
    for n, (alias, kind, tags) in enumerate(callers):
        write_script(root, alias, f"alias: {alias}\n{head.format(uid=f'a{n}' * 8)}tags: [{alias.replace('-', '')}]\n"
                                  f"new_env_keys: [{prefix}_ENVP_SEEN_*]\n"
                                  f"{kind}:\n  - {{tags: '{tags}', env: {dep_env}}}\n", meta_file=meta_file)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not: it has ended, and waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:  # "PID (COMM) STATE ...": COMM may hold ")"
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def left_running(pids: Sequence[int], deadline_s: float = 300.0) -> list[int]:
    """The processes of ``pids`` still running after up to ``deadline_s`` (a SIGKILL, or the
    watchdog of a killed cmx, acts a moment later: polled, never a sleep sized to the machine)."""
    deadline = time.monotonic() + deadline_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [pid for pid in pids if alive(pid)]


def kill_all(pids: Sequence[int]) -> None:
    """SIGKILL what a failed test left of its own script."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
