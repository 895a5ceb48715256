"""The warm-run replay: ``cmx run`` again with nothing changed, without loading plugins.

A ``cmx run`` whose every node was a valid cache hit leaves a memo (written by
:mod:`cmx_core.run.replay_record`) keyed by the exact invocation: argv, working directory,
interpreter, cmx version and the ``CMX_*``, ``XDG_*``, ``HOME``, ``PYTHONPATH`` and
``VIRTUAL_ENV`` variables. The memo is signed with a key kept in the data directory
(:func:`signing_key`), so a memo planted in a shared cache is never trusted. The next
identical invocation checks, in this order and with nothing but the standard library and
the fact fingerprint functions:

* the memo's deadline (the earliest cache-entry expiry or fact lifetime) has not passed;
* the installed plugins are the same (the plugin-discovery fingerprint);
* every recipe directory still points where it pointed (symlinks);
* every recipe source's directories and files, every cache entry's metadata and recorded
  paths, every ``path`` input, every fact's cache file and the source of every cmx and
  plugin module the run loaded have the same size and mtime;
* the variables steps let through (``env_allow``) have the same values;
* every fact's fingerprint function (found by name, see :mod:`cmx_core.providers.refs`) returns the
  fingerprint its cached value was recorded under, and uncached facts return the same value;
* every step type's cache validator still accepts its entry.

Then the resolution, the cache keys and every cache decision are necessarily what the full
path would compute, so the replay writes the same plan, lock and result (a new run id and
new times), indexes it, and prints what ``cmx run`` prints. If any check fails, or the
memo is missing or unreadable, it returns None and the full path runs (and writes a new
memo). ``CMX_NO_REPLAY=1`` turns it off; ``-v`` says when it was used.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import sys
import time

from cmx_core import __version__, paths
from cmx_core.datautil import atomic_write, digest, freeze, to_plain
from cmx_core.errors import ResultsError
from cmx_core.plugins.command_index import discovery_fingerprint
from cmx_core.reads import file_state
from cmx_core.results.gitinfo import engine_git_commit
from cmx_core.results.store import ResultStore
from cmx_core.results.summary import run_summary, summary_width
from cmx_core.results.validate import validate_document
from cmx_core.results.writer import dumps
from cmx_core.run.runids import new_run_id, run_dir_name, utc_timestamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MEMO_FORMAT = 3  # 3: a file state has its ctime
KEY_ENV_PREFIXES = ("CMX_", "XDG_")
KEY_ENV_NAMES = ("HOME", "PYTHONPATH", "VIRTUAL_ENV")


def invocation_key(argv: list[str]) -> str | None:
    """What must be identical for a memo to apply: the arguments, where and with what
    interpreter and cmx they run, and the environment cmx itself reads. None when it cannot
    be said (the working directory was deleted)."""
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(KEY_ENV_PREFIXES) or k in KEY_ENV_NAMES)
    text = json.dumps([MEMO_FORMAT, __version__, sys.executable, cwd, list(argv), env])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


KEY_FILE = "replay.key"


def signing_key(*, create: bool = False) -> bytes:
    """The secret memos are signed with: ``<data dir>/replay.key``, readable by this user
    only. It lives outside the cache so that whoever can write a shared cache directory
    cannot forge a memo (which names functions to call). OSError when it is missing (and
    not ``create``) or not private to this user."""
    path = os.path.join(paths.data_root(), KEY_FILE)
    if create and not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another cmx created it meanwhile
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(os.urandom(32).hex())
    fd = os.open(path, os.O_RDONLY)
    with os.fdopen(fd) as handle:
        st = os.fstat(handle.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(f"{path} is not private to this user")
        key = handle.read().strip()
    if len(key) < 32:
        raise PermissionError(f"{path} is not a cmx replay key")
    return key.encode()


def write_signed(path: str, body: str) -> None:
    """Write ``body`` (JSON text) to ``path`` as a memo: its HMAC with this user's key
    (:func:`signing_key`, made when missing) on the first line, the body after it."""
    signature = hmac.new(signing_key(create=True), body.encode(), "sha256").hexdigest()
    atomic_write(path, f"{signature}\n{body}")


def read_signed(path: str) -> Any:
    """The JSON body of the memo at ``path`` if this user's key signed it; None when it is
    missing, unreadable, not signed so or not JSON."""
    try:
        with open(path, "rb") as handle:
            signature, _, body = handle.read().partition(b"\n")
        expected = hmac.new(signing_key(), body, "sha256").hexdigest().encode()
        return json.loads(body) if hmac.compare_digest(signature, expected) else None
    except (OSError, ValueError, RecursionError):
        return None


MEMO_DIR = "replay"
"""Memos live in ``<cache>/replay/<key>.json``: a signature line, then the JSON body."""


def memo_path(key: str) -> str:
    return os.path.join(paths.cache_root(), MEMO_DIR, f"{key}.json")


def prune_memos(cache_root: str, older_than_s: float | None = None) -> None:
    """Remove the memos that are expired, unreadable or older than ``older_than_s``."""
    now = time.time()
    folder = os.path.join(cache_root, MEMO_DIR)
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        path = os.path.join(folder, name)
        if name.endswith(".json") and memo_is_stale(path, now, older_than_s):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def memo_is_stale(path: str, now: float, older_than_s: float | None) -> bool:
    """A memo past its deadline, older than asked, or unreadable (it would only ever send
    its run down the full path, which writes a fresh one): what ``cmx cache prune`` drops."""
    try:
        with open(path, "rb") as handle:
            deadline = json.loads(handle.read().partition(b"\n")[2]).get("deadline")
        age = now - os.stat(path).st_mtime
    except (OSError, ValueError, AttributeError):
        return True
    return (deadline is not None and now >= float(deadline)) or (older_than_s is not None and age > older_than_s)


def disabled() -> bool:
    """``CMX_NO_REPLAY`` set (to anything but 0): neither replay nor write memos."""
    return os.environ.get("CMX_NO_REPLAY", "") not in ("", "0")


DAMAGED = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)
"""What reading a memo that is not as cmx wrote it raises."""


def try_replay(argv: list[str], key: str | None) -> int | None:
    """Replay ``cmx <argv>`` (whose :func:`invocation_key` is ``key``) from its memo and
    return the exit code, or None when the full path must run (no memo, or something it
    depends on changed; with ``-v`` the reason is printed)."""
    if key is None or disabled():
        return None
    memo = _read_memo(key, argv)
    if memo is None:
        return None

    why = _why_stale(memo)
    try:
        run = None if why else _prepare(memo, time.time())
    except (*DAMAGED, ResultsError):
        why, run = "the memo is damaged", None  # the full path writes a good one
    if run is None:
        if "-v" in argv or "--verbose" in argv:
            print(f"cmx: not replaying memo {key[:12]}: {why}", file=sys.stderr)
        return None
    return _write_run(run)


def explain_stale(argv: list[str]) -> str | None:
    """Why the memo of ``argv`` does not apply, or None when it does."""
    key = invocation_key(argv)
    memo = None if key is None else _read_memo(key, argv)
    return "no memo" if memo is None else _why_stale(memo)


def _why_stale(memo: dict[str, Any]) -> str | None:
    """What changed since the memo was written, or None when it still holds."""
    try:
        return _changed(memo) or _entries_refused(memo)
    except DAMAGED:
        return "the memo is damaged"


def _read_memo(key: str, argv: list[str]) -> dict[str, Any] | None:
    """The memo of ``key`` if it exists, is signed with this user's key and is for ``argv``."""
    memo = read_signed(memo_path(key))
    if not isinstance(memo, dict) or memo.get("format") != MEMO_FORMAT or memo.get("key") != key \
            or memo.get("argv") != argv:
        return None
    return memo


def _changed(memo: dict[str, Any]) -> str | None:
    """The first thing that differs from when the memo was written, or None."""
    deadline = memo.get("deadline")
    if deadline is not None and time.time() >= deadline:
        return "a cache entry or a fact expired"

    if memo["discovery"] != discovery_fingerprint():
        return "the installed plugins changed"
    for path, real in memo["links"]:
        if os.path.realpath(os.path.expanduser(path)) != real:
            return f"{path} now points elsewhere"
    for state in memo["files"]:
        if file_state(state[0]) != state:
            return f"{state[0]} changed"
    for name, value in memo["env"].items():
        if os.environ.get(name) != value:
            return f"${name} changed"
    return _facts_changed(memo["facts"])


def _facts_changed(facts: list[dict[str, Any]]) -> str | None:
    from cmx_core.providers.refs import resolve  # deferred: not needed by cmx --help or a replayed warm run

    for fact in facts:
        try:
            if "fingerprint" in fact:
                ref = fact["fingerprint_ref"]
                current = "" if ref is None else str(resolve(ref)())
                if current != fact["fingerprint"]:
                    return f"fact {fact['name']} changed"
            else:

                if digest(to_plain(resolve(fact["detect_ref"])())) != fact["digest"]:
                    return f"fact {fact['name']} changed"
        except Exception:  # noqa: BLE001 - whatever went wrong, the full path will say it
            return f"fact {fact['name']} could not be checked"
    return None


def _entries_refused(memo: dict[str, Any]) -> str | None:
    """Why a step validator (e.g. "the image still exists") refuses its cache entry."""
    if not memo["validators"]:
        return None
    from cmx_core.cache.store import ENTRY_REF, rebase  # deferred: start-up: pulls filelock (77 modules)
    from cmx_core.providers.refs import resolve  # deferred: not needed by cmx --help or a replayed warm run

    for check in memo["validators"]:
        try:
            with open(check["meta"], encoding="utf-8") as handle:  # paths are relative to the entry
                outputs = rebase(json.load(handle)["outputs"], ENTRY_REF, os.path.dirname(check["meta"]))
            if not resolve(check["ref"])(freeze(outputs)):
                return f"the {check['step']} validator refused its cache entry"
        except Exception:  # noqa: BLE001 - a failing validator means "recompute"
            return f"the {check['step']} validator failed"
    return None


class _Run:
    """A replayed run, built and validated before anything is written."""

    def __init__(self, memo: dict[str, Any], run_dir: str, document: dict[str, Any], text: str) -> None:
        self.run_dir = run_dir
        self.document = document
        self.text = text
        self.result_path = os.path.join(run_dir, "result.json")
        self.plan_json, self.lock_json = str(memo["plan_json"]), str(memo["lock_json"])
        self.run_files = {str(name): str(text) for name, text in memo["run_files"].items()}
        for name in self.run_files:  # each becomes part of a path: checked before anything is written
            if os.path.basename(name) != name or name.startswith(".") or not name.endswith(".json"):
                raise ValueError(f"not a run file name: {name!r}")
        self.json_output, self.verbose = bool(memo["json"]), bool(memo["verbose"])
        self.nodes = [str(node) for node in memo["nodes"]]
        self.memo_key = str(memo["key"])
        self.width = summary_width([str(arg) for arg in memo["argv"]])


def _prepare(memo: dict[str, Any], started: float) -> _Run:
    """The new run's directory and validated result; raises if the memo is malformed."""
    recipe = str(memo["recipe"])
    if not recipe or recipe[0] == "." or not all(c.isalnum() or c in "._-" for c in recipe):
        raise ValueError(f"not a recipe name: {recipe!r}")  # it becomes part of a path
    run_id = new_run_id()
    run_dir = os.path.join(paths.data_root(), "runs", run_dir_name(recipe, run_id))
    document = memo["document"]
    document["run_id"] = run_id
    document["software"]["engine"]["git_commit"] = engine_git_commit()
    finished = time.time()
    document["timing"] = {"started_at": utc_timestamp(started), "finished_at": utc_timestamp(finished),
                          "wall_s": max(0.0, round(finished - started, 6))}
    document["created_at"] = utc_timestamp(finished)
    result_path = os.path.join(run_dir, "result.json")
    validate_document(document, source=result_path)
    if not isinstance(memo["plan_json"], str) or not isinstance(memo["lock_json"], str):
        raise TypeError("plan_json and lock_json must be text")
    if not isinstance(memo["nodes"], list):
        raise TypeError("nodes must be a list")
    return _Run(memo, run_dir, document, dumps(document, source=result_path))


def _write_run(run: _Run) -> int:
    """Write the run directory, index the result and print what ``cmx run`` prints."""
    os.makedirs(run.run_dir)
    atomic_write(os.path.join(run.run_dir, "plan.json"), run.plan_json)
    atomic_write(os.path.join(run.run_dir, "lock.json"), run.lock_json)
    for name, text in run.run_files.items():
        atomic_write(os.path.join(run.run_dir, name), text)
    atomic_write(run.result_path, run.text)
    document, result_path = run.document, run.result_path
    ResultStore(os.path.join(paths.data_root(), paths.RESULTS_DB)).index(document, result_path, validated=True)
    if run.verbose and not run.json_output:
        for node_id in run.nodes:
            print(f"cmx: done {node_id} (cached)", file=sys.stderr)
        print(f"cmx: nothing changed since memo {run.memo_key[:12]}; replayed without loading plugins "
              "(CMX_NO_REPLAY=1 runs the full path)", file=sys.stderr)
    if run.json_output:
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    else:
        print(run_summary(document, result_path, run.width))
    return 0
