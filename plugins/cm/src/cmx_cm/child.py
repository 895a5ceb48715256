"""A child ``cmx`` the script runner starts: a run-time dep (:mod:`cmx_cm.lifecycle`) or a
script that a ``customize.py`` runs through ``cmind.access({'action': 'run', ...})``
(:mod:`cmx_cm.actions`). Both wait for it, so a chain that comes back to a script already
waiting with the same env would never end: it is refused with the chain (CM recurses until
the stack overflows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

STACK_ENV = "CMX_CM_STACK"
"""The children whose callers are waiting (``alias#digest:...``, the digest of the tags,
inputs and env each was given)."""
DEFAULT_TIMEOUT_S = 3600.0
MAX_DEPTH = 16


class ChildFailed(RuntimeError):
    """A child run failed; the message is one line."""


def run_child(argv: Sequence[str], key: str, what: str, timeout_s: float | None) -> dict[str, Any]:
    """Run ``python -m cmx_core ARGV... --json -q`` and return its result document; ``key``
    (``target#digest``) names it on the stack, ``what`` in messages."""
    stack = [s for s in os.environ.get(STACK_ENV, "").split(":") if s]
    if key in stack or len(stack) >= MAX_DEPTH:
        chain = " > ".join(s.split("#")[0] for s in [*stack, key])
        raise ChildFailed(f"{what} would run {key.split('#')[0]} again with the same env while it waits for "
                          f"itself ({chain}): it depends back and its conditions did not skip it")
    env = {**os.environ, STACK_ENV: ":".join([*stack, key])}
    env.pop("PYTHONSAFEPATH", None)
    timeout = float(timeout_s or DEFAULT_TIMEOUT_S)
    try:
        done = subprocess.run([sys.executable, "-m", "cmx_core", *argv, "--json", "-q"], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{what} ran past {timeout:g} s and was stopped") from None
    sys.stderr.write(done.stderr)
    try:
        document = json.loads(done.stdout) if done.stdout.strip() else {}
    except ValueError:
        document = {}
    if done.returncode != 0 or not isinstance(document, dict) or "outputs" not in document:
        lines = done.stderr.strip().splitlines()
        errors = [line.removeprefix("cmx: error: ") for line in lines if line.startswith("cmx: error: ")]
        raise ChildFailed(f"{what} failed: {(errors or lines or [f'exit code {done.returncode}'])[-1]}")
    return document
