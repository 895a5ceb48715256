"""The list of added recipe repositories (``<data dir>/repos.json``): name, source, ref,
pinned commit and kind of each. It lives in the data directory, not the cache, so that
clearing the cache never forgets which repositories were added (their clones are cached
and re-made from the source on demand)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cmx_core import paths, reads
from cmx_core.errors import CmxError, UsageError

LISTING_FORMAT = 1
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PLAIN = "cmx"
"""The kind of a repository whose files are cmx recipes; any other kind is the name of the
plugin that translates it (``cm``, cmx-cm's, for a CM/MLC script collection)."""


@dataclass(frozen=True)
class Repo:
    """One added repository, pinned at ``commit``."""

    name: str
    url: str  # as cloned from: a URL, or the absolute path of a local repository or bundle
    ref: str | None  # what --ref asked for (None: the source's HEAD)
    commit: str
    kind: str = PLAIN
    added_at: str = ""
    updated_at: str = ""

    def at(self, commit: str) -> Repo:
        """The same repository pinned at another commit (a lock's)."""
        return replace(self, commit=commit)


def listing_path() -> Path:
    return paths.data_dir() / "repos.json"


def check_name(name: str, option: str = "--name") -> str:
    if not NAME_RE.match(name):
        raise UsageError(f"{option} {name!r}: a repository name is letters, digits, '.', '_' and '-' "
                         "(at most 64, starting with a letter or digit); choose another with --name")
    return name


def read_repos() -> list[Repo]:
    """The added repositories (none when the listing does not exist)."""
    path = listing_path()
    reads.file(path)  # a warm replay must notice `cmx repo update`
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        entries = doc["repos"]
        return [Repo(**{k: e[k] for k in Repo.__dataclass_fields__ if k in e}) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CmxError(f"{path}: not a cmx repository list ({type(exc).__name__}: {exc}); "
                       "fix or remove it, then add the repositories again with 'cmx repo add'") from None


def write_repos(repos: list[Repo]) -> None:
    """Replace the listing atomically (a reader never sees half of it)."""
    path = listing_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": LISTING_FORMAT, "repos": [asdict(r) for r in repos]}, indent=2) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)
