"""The git commit of a cmx-core source checkout, read from ``.git`` without running git.

Import-light (``os`` only): every run's result records it, the warm-run replay included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_GIT_COMMIT: list[str | None] = []
ENGINE_COMMIT_ENV = "CMX_ENGINE_GIT_COMMIT"
"""Set by a remote executor for its far side: the commit of the engine that shipped the job,
so a run inside a container (whose cmx is a wheel without ``.git``) still records it."""


def engine_git_commit() -> str | None:
    """The commit of a cmx-core source checkout (editable install), read from ``.git``
    without running git; else the commit the shipping engine passed in
    ``CMX_ENGINE_GIT_COMMIT``; None for an installed wheel. Computed once per process."""
    if not _GIT_COMMIT:
        package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        found = _read_git_commit(os.path.join(os.path.dirname(package), ".git"))
        _GIT_COMMIT.append(found or commit_from_env(os.environ))
    return _GIT_COMMIT[0]


def commit_from_env(env: Mapping[str, str]) -> str | None:
    """``CMX_ENGINE_GIT_COMMIT`` when it holds a commit id (anything else is ignored)."""
    value = env.get(ENGINE_COMMIT_ENV, "").strip().lower()
    return value if _is_sha(value) else None


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _read_git_commit(git_dir: str) -> str | None:
    try:
        if os.path.isfile(git_dir):  # a linked worktree: ".git" holds "gitdir: PATH"
            named = _text(git_dir).split(":", 1)[1].strip()
            git_dir = os.path.join(os.path.dirname(git_dir), named)  # PATH may be relative
        head = _text(os.path.join(git_dir, "HEAD")).strip()
        if not head.startswith("ref: "):
            return head if _is_sha(head) else None
        ref = head[len("ref: "):]
        # a worktree's own folder holds its HEAD; its branches live in the repository's
        # common folder, which the "commondir" file names (relative to the worktree's folder)
        common = os.path.join(git_dir, "commondir")
        if os.path.isfile(common):
            git_dir = os.path.join(git_dir, _text(common).strip())
        ref_file = os.path.join(git_dir, ref)
        if os.path.isfile(ref_file):
            sha = _text(ref_file).strip()
            return sha if _is_sha(sha) else None
        for line in _text(os.path.join(git_dir, "packed-refs")).splitlines():
            if line.endswith(" " + ref):
                sha = line.split(" ", 1)[0]
                return sha if _is_sha(sha) else None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _is_sha(text: str) -> bool:
    return 7 <= len(text) <= 64 and all(c in "0123456789abcdef" for c in text)
