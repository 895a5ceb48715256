"""Running git: always an argument list (never a shell), never prompting, with the ``ext``
transport off. A failure is a :class:`GitFailed` carrying git's own last line."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from cmx_core.errors import CmxError

GIT_TIMEOUT_S = 600.0
"""How long one git command may take (a clone of a large collection over a slow link)."""

_SAFE_CONFIG = ("-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null",
                "-c", "advice.detachedHead=false")
"""``ext::`` URLs would run a command; hooks of a cloned repository never run."""


class GitFailed(CmxError):
    """git exited non-zero; ``detail`` is the last line it wrote to stderr."""

    def __init__(self, args: Sequence[str], detail: str) -> None:
        super().__init__(f"git {' '.join(args[:2])}: {detail}")
        self.detail = detail


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", SSH_ASKPASS="true", LC_ALL="C",
               GIT_CONFIG_NOSYSTEM="1")
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


def git(args: Sequence[str], *, git_dir: Path | None = None, stdout: int | None = None) -> str:
    """Run ``git ARGS`` (in the bare repository ``git_dir`` when given); its stdout."""
    prefix = ["git", *_SAFE_CONFIG] + (["--git-dir", str(git_dir)] if git_dir else [])
    try:
        done = subprocess.run([*prefix, *args], env=_env(), stdin=subprocess.DEVNULL,
                              stdout=stdout if stdout is not None else subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise CmxError("git is not installed; install git to use recipe repositories") from None
    except subprocess.TimeoutExpired:
        raise GitFailed(args, f"no answer within {GIT_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        raise GitFailed(args, _detail(done.stderr.decode(errors="replace"), done.returncode))
    return done.stdout.decode(errors="replace") if done.stdout is not None else ""


def _detail(stderr: str, returncode: int) -> str:
    """git's first ``fatal:``/``error:`` line without its prefix (else its last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[-1] if lines else f"exit status {returncode}"


def resolve_commit(git_dir: Path, rev: str) -> str:
    """The full commit id ``rev`` names in ``git_dir`` (GitFailed if it names none)."""
    return git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
               git_dir=git_dir).strip()
