"""Adding, updating, removing recipe repositories and checking out pinned trees.

Each repository is a bare clone in ``<cache>/repos/git/<name>.git``; each commit that is
used is a read-only checkout in ``<cache>/repos/trees/<name>/<commit>``, made from the clone
with ``git archive`` and never changed again, so an old lock replays against the tree of
the commit it recorded even after ``cmx repo update`` moved the repository on. Every commit
a repository was pinned at keeps a ``refs/cmx/pins/<commit>`` ref, so a fetch or ``git gc``
never drops it. One file lock (``<cache>/repos/.lock``) serialises changes across processes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cmx_core import paths
from cmx_core.errors import CmxError, UsageError
from cmx_core.repos.git import GitFailed, git, resolve_commit
from cmx_core.repos.records import PLAIN, Repo, check_name, read_repos, write_repos

if TYPE_CHECKING:
    from filelock import FileLock

Classify = Callable[[Path], str]
"""The kind of a checked-out tree (``cmx``, or the plugin that translates it)."""

_SUFFIXES = (".git", ".bundle")


def repos_root() -> Path:
    return paths.cache_dir() / "repos"


def clone_dir(name: str) -> Path:
    return repos_root() / "git" / f"{name}.git"


def _lock() -> FileLock:
    from filelock import FileLock  # deferred: heavy, and every session imports this module

    repos_root().mkdir(parents=True, exist_ok=True)
    return FileLock(str(repos_root() / ".lock"))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def source_of(given: str) -> str:
    """An existing path as an absolute path; anything else must look like a git URL."""
    if given.startswith("-") or not given.strip():
        raise UsageError(f"repo add {given!r}: not a path or URL")
    local = Path(given).expanduser()
    if local.exists():
        return str(local.resolve())
    if "://" in given or (":" in given and not given.startswith(("/", "."))):
        return given
    raise UsageError(f"repo add {given}: no such file or directory, and not a URL; "
                     "give a git URL, a local git repository or a bundle file")


def default_name(source: str) -> str:
    base = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    for suffix in _SUFFIXES:
        base = base.removesuffix(suffix)
    return base


def find(name: str) -> Repo:
    for repo in read_repos():
        if repo.name == name:
            return repo
    known = ", ".join(r.name for r in read_repos()) or "none added"
    raise UsageError(f"repo {name!r}: not added ({known}); see 'cmx repo list'")


def add(given: str, ref: str | None, name: str | None, classify: Classify) -> Repo:
    """Clone ``given``, pin ``ref`` (or its HEAD) and record it; nothing is left behind when
    any step fails."""
    source = source_of(given)
    name = check_name(name or default_name(source), "--name" if name else "the repository name")
    with _lock():
        if any(r.name == name for r in read_repos()):
            raise UsageError(f"repo {name!r} is already added; 'cmx repo update {name}', "
                             "or give another --name")
        target = clone_dir(name)
        _clone(source, target)
        try:
            commit = _pin(target, ref, source)
            kind = classify(tree(name, commit))
        except BaseException:
            _remove_files(name)
            raise
        repo = Repo(name, source, ref, commit, kind, _now(), _now())
        write_repos([*read_repos(), repo])
    return repo


def update(name: str, classify: Classify) -> tuple[Repo, Repo]:
    """Fetch ``name``'s source and pin its ref's new commit; (before, after)."""
    with _lock():
        before = find(name)
        target = clone_dir(name)
        if not target.is_dir():
            _clone(before.url, target)
        try:
            git(["-c", "gc.auto=0", "fetch", "--quiet", "--force", "--update-head-ok", "--", before.url,
                 "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"], git_dir=target)
        except GitFailed as exc:
            raise UsageError(f"repo update {name}: cannot fetch {before.url}: {exc.detail}") from None
        commit = _pin(target, before.ref, before.url)
        after = Repo(name, before.url, before.ref, commit, classify(tree(name, commit)),
                     before.added_at, _now())
        write_repos([after if r.name == name else r for r in read_repos()])
    return before, after


def remove(name: str) -> Repo:
    """Forget ``name`` and delete its clone and trees."""
    with _lock():
        repo = find(name)
        write_repos([r for r in read_repos() if r.name != name])
        _remove_files(name)
    return repo


def tree(name: str, commit: str) -> Path:
    """The checked-out tree of ``name`` at ``commit``, made from the clone if missing."""
    final = repos_root() / "trees" / name / commit
    if final.is_dir():
        return final
    clone = clone_dir(name)
    if not clone.is_dir():
        raise CmxError(f"repo {name}: its clone {clone} is missing; 'cmx repo rm {name}' and add it again")
    try:
        resolve_commit(clone, commit)
    except GitFailed:
        raise CmxError(f"repo {name}: commit {commit[:12]} is not in its clone; "
                       f"'cmx repo update {name}' if the source still has it") from None
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}.", dir=final.parent))
    try:
        archive = staging / "tree.tar"
        git(["archive", "--format=tar", "-o", str(archive), commit], git_dir=clone)
        # every run opens the repo store, only a first checkout unpacks an archive
        import tarfile  # deferred: as tarsafe below

        # deferred: the sandbox package that holds tarsafe costs ~14 ms to import
        from cmx_core.sandbox.tarsafe import data_filter, extract_all

        with tarfile.open(archive) as tar:
            extract_all(tar, staging / "tree", data_filter)
        archive.unlink()
        try:
            os.rename(staging / "tree", final)
        except OSError:
            if not final.is_dir():  # another process made it meanwhile otherwise
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _clone(source: str, target: Path) -> None:
    """A bare clone of ``source`` at ``target``, made beside it and renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        git(["clone", "--bare", "--quiet", "--", source, str(staging / "clone")])
        os.rename(staging / "clone", target)
    except GitFailed as exc:
        raise UsageError(f"repo add {source}: cannot clone it: {exc.detail}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _pin(clone: Path, ref: str | None, source: str) -> str:
    """The commit ``ref`` (or HEAD) names, kept alive by a ``refs/cmx/pins/`` ref."""
    try:
        commit = resolve_commit(clone, ref or "HEAD")
    except GitFailed:
        what = f"--ref {ref}" if ref else "HEAD"
        raise UsageError(f"{what}: not a branch, tag or commit of {source}"
                         + ("" if ref else "; give --ref BRANCH") ) from None
    git(["update-ref", f"refs/cmx/pins/{commit}", commit], git_dir=clone)
    return commit


def _remove_files(name: str) -> None:
    shutil.rmtree(clone_dir(name), ignore_errors=True)
    shutil.rmtree(repos_root() / "trees" / name, ignore_errors=True)


def plain(_tree: Path) -> str:
    """A :data:`Classify` for callers without plugins: every tree holds cmx recipes."""
    return PLAIN
