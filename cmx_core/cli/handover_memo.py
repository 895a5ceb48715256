"""Remembered hand-overs: a command that hands its work to another (``cmx cm run script`` to
``cmx run recipe``, :class:`cmx_core.errors.HandOver`) may say which files its choice read;
the next identical invocation then goes straight to the command it handed over to, without
building the parser or loading the plugins that made the choice.

A memo is ``<cache>/handover/<command word>/<key>.json``, keyed and signed as the warm-run
memos are (:mod:`cmx_core.run.replay`: the arguments, working directory, interpreter, cmx
version and cmx's own environment variables; an HMAC with this user's private key, so a memo
planted in a shared cache is never followed). It holds as long as the installed plugins (the
discovery fingerprint) and every file the command named keep their size, mtime and ctime.
``CMX_NO_REPLAY=1`` turns memos off. Nothing here is imported unless a memo folder exists for
the command word, so other commands pay one ``stat``.
"""

from __future__ import annotations

import contextlib
import os
import sys

from cmx_core import paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FORMAT = 1
FOLDER = "handover"


def _folder(word: str) -> str | None:
    """The memo folder of a command word, or None for a word that is not a plain name."""
    if not word or not word.replace("-", "").replace("_", "").isalnum():
        return None
    return os.path.join(paths.cache_root(), FOLDER, word)


def may_have(argv: Sequence[str]) -> bool:
    """Whether a memo could exist for ``argv``: its command word has a memo folder."""
    folder = _folder(argv[0]) if argv else None
    return folder is not None and os.path.isdir(folder)


def invocation(argv: Sequence[str]) -> str | None:
    """The memo key of ``argv`` (None: memos are off, or it cannot be said)."""
    from cmx_core.run import replay  # deferred: only for a command word that has memos

    return None if replay.disabled() else replay.invocation_key(list(argv))


def remembered(argv: Sequence[str], key: str) -> list[str] | None:
    """The command line ``argv`` handed over to last time, if its memo is signed by this user
    and nothing it depended on has changed; else None."""
    from cmx_core.plugins.command_index import discovery_fingerprint  # deferred: only for a command word that has memos
    from cmx_core.reads import file_state  # deferred: only for a command word that has memos
    from cmx_core.run.replay import read_signed  # deferred: only for a command word that has memos

    folder = _folder(argv[0])
    if folder is None:
        return None
    memo = read_signed(os.path.join(folder, f"{key}.json"))
    if not isinstance(memo, dict):
        return None
    try:
        if memo["format"] != FORMAT or memo["key"] != key or memo["argv"] != list(argv) \
                or memo["fingerprint"] != discovery_fingerprint():
            return None
        if any(file_state(state[0]) != state for state in memo["files"]):
            return None
        handed = [str(arg) for arg in memo["to"]]
    except (KeyError, TypeError, IndexError):
        return None
    if "-v" in argv or "--verbose" in argv:
        print(f"cmx: handed over as remembered (memo {key[:12]}): cmx {' '.join(handed)}", file=sys.stderr)
    return handed


def remember(argv: Sequence[str], key: str, handed: Sequence[str], depends_on: Sequence[str]) -> None:
    """Write the memo of a hand-over whose choice read only ``depends_on`` (and the plugins)."""
    import json  # deferred: only when a hand-over is remembered

    from cmx_core.plugins.command_index import discovery_fingerprint  # deferred: only when a hand-over is remembered
    from cmx_core.reads import file_state  # deferred: only when a hand-over is remembered
    from cmx_core.run.replay import write_signed  # deferred: only when a hand-over is remembered

    folder = _folder(argv[0]) if argv else None
    if folder is None:
        return
    body = json.dumps({"format": FORMAT, "key": key, "argv": list(argv), "to": list(handed),
                       "fingerprint": discovery_fingerprint(), "files": [file_state(p) for p in depends_on]})
    try:
        os.makedirs(folder, exist_ok=True)
        write_signed(os.path.join(folder, f"{key}.json"), body)
    except OSError:
        pass  # a memo is a shortcut: the next run makes its choice again


def prune(cache_root: str, older_than_s: float | None = None) -> int:
    """Remove the memos that no longer hold (a file they read changed), are unreadable or are
    older than ``older_than_s`` (``cmx cache prune``); how many were removed."""
    import json  # deferred: cmx cache prune only
    import time  # deferred: cmx cache prune only

    from cmx_core.reads import file_state  # deferred: cmx cache prune only

    removed, now = 0, time.time()
    top = os.path.join(cache_root, FOLDER)
    for word in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        folder = os.path.join(top, word)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as handle:
                    files = json.loads(handle.read().partition(b"\n")[2])["files"]
                stale = any(file_state(state[0]) != state for state in files) or (
                    older_than_s is not None and now - os.stat(path).st_mtime > older_than_s)
            except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
                stale = True
            if stale:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                removed += 1
    return removed
