"""The added recipe repositories as catalog sources, at their pinned commits or at the
commits a lock recorded, and the record of them a lock and a result carry.

A tree whose files are cmx recipes is a source as it is; a tree some plugin recognises (the
``cmx_repo_recipes`` hook: cmx-cm for a CM/MLC script collection) is a source through the
directories that plugin translates it into, so such a repository needs no import step."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import CmxError
from cmx_core.plugins.registry import Registry
from cmx_core.repos import store
from cmx_core.repos.records import PLAIN, Repo, read_repos
from cmx_core.run.lock_records import Lock


@dataclass(frozen=True)
class RepoUse:
    """A repository as one session sees it: where it came from and the commit used."""

    name: str
    url: str
    commit: str
    kind: str

    @property
    def label(self) -> str:
        """The catalog source label of its recipes (a recipe's ``source``)."""
        return f"repo:{self.name}"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "url": self.url, "commit": self.commit, "kind": self.kind}


def translated(registry: Registry, tree: Path) -> tuple[str, list[Path]] | None:
    """(plugin, recipe directories) of the first plugin that recognises ``tree``."""
    for impl in registry.hook.cmx_repo_recipes.get_hookimpls():
        found = impl.function(tree=tree)
        if found is not None:
            return impl.plugin_name, [Path(p) for p in found]
    return None


def classifier(registry: Registry) -> store.Classify:
    """The kind of a tree: the plugin translating it, else ``cmx``."""
    def classify(tree: Path) -> str:
        found = translated(registry, tree)
        return found[0] if found else PLAIN
    return classify


def lock_pins(locked: Lock | None) -> dict[str, RepoUse] | None:
    """The repositories a lock recorded, by name (None without a lock)."""
    if locked is None:
        return None
    return {r.name: RepoUse(r.name, r.url or "URL", r.commit, r.kind or PLAIN) for r in locked.repos}


def session_repos(registry: Registry, pins: Mapping[str, RepoUse] | None = None
                  ) -> tuple[tuple[RepoUse, ...], list[tuple[str, Path]]]:
    """The repositories in use and their (label, directory) sources, each at its pinned
    commit or at the commit ``pins`` (a lock's, :func:`lock_pins`) gives it. A pinned
    repository that is no longer added is an error naming the command that adds it back."""
    pins = dict(pins or {})
    added = {r.name: r for r in read_repos()}
    missing = [use for name, use in pins.items() if name not in added]
    if missing:
        use = missing[0]
        raise CmxError(f"the lock uses recipe repository {use.name!r} at {use.commit[:12]}, which is not added "
                       f"here; 'cmx repo add {shlex.quote(use.url)} --name {use.name}' and run again")
    uses, sources = [], []
    for repo in added.values():
        pinned = repo.at(pins[repo.name].commit) if repo.name in pins else repo
        use = RepoUse(repo.name, repo.url, pinned.commit, repo.kind)
        uses.append(use)
        sources += [(use.label, directory) for directory in _directories(registry, pinned)]
    return tuple(uses), sources


def origins(uses: Sequence[RepoUse], sources: Sequence[tuple[str, Path]]) -> dict[str, str]:
    """Each cmx-recipe repository's cached tree (its source directory of
    :func:`session_repos`) -> where its files are for the user: the local repository it was
    added from, else ``URL@COMMIT`` (so a message names the user's file, not the cache's copy)."""
    shown = {use.label: use.url if Path(use.url).is_absolute() and Path(use.url).is_dir()
             else f"{use.url}@{use.commit[:12]}" for use in uses if use.kind == PLAIN}
    return {str(directory): shown[label] for label, directory in sources if label in shown}


def _directories(registry: Registry, repo: Repo) -> list[Path]:
    tree = store.tree(repo.name, repo.commit)
    if repo.kind == PLAIN:
        return [tree]
    found = translated(registry, tree)
    if found is None:
        raise CmxError(f"repo {repo.name}: no loaded plugin translates it (plugin '{repo.kind}' did when it "
                       f"was added); install or enable that plugin, or 'cmx repo rm {repo.name}'")
    return found[1]
