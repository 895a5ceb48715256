"""``cmx repo add|list|update|rm``: recipe repositories, as ``cm pull repo`` / ``mlc pull
repo`` (docs/repos.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from cmx_core.cli.listing import Listing, add_format_option, chosen_format, render
from cmx_core.errors import UsageError
from cmx_core.plugins.loader import get_registry
from cmx_core.repos import store
from cmx_core.repos.records import Repo, read_repos
from cmx_core.results.grid import print_fitted, width_for
from cmx_core.run.engine import session_catalog
from cmx_core.run.repo_sources import classifier

SHORT = 12
"""Characters of a commit id shown in listings."""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    repo = sub.add_parser("repo", parents=[common], help="add, list, update and remove recipe repositories")
    actions = repo.add_subparsers(dest="action", metavar="ACTION", parser_class=type(repo))
    add = actions.add_parser("add", parents=[common], help="clone a git repository (URL, path or bundle) "
                             "and add its recipes, pinned at a commit")
    add.add_argument("source", metavar="URL|PATH", help="a git URL, a local git repository or a git bundle file")
    add.add_argument("--ref", metavar="REV", help="branch, tag or commit to pin (default: its HEAD)")
    add.add_argument("--name", help="the repository's name (default: from the URL or path)")
    add.set_defaults(handler=cmd_add)
    listing = actions.add_parser("list", parents=[common], help="the added repositories and their commits")
    add_format_option(listing)
    listing.set_defaults(handler=cmd_list)
    update = actions.add_parser("update", parents=[common], help="fetch and pin the new commit of its ref")
    update.add_argument("name", nargs="?", help="the repository (default: every one)")
    update.set_defaults(handler=cmd_update)
    rm = actions.add_parser("rm", parents=[common], help="remove a repository, its clone and its trees")
    rm.add_argument("name", help="the repository")
    rm.set_defaults(handler=cmd_rm)
    repo.set_defaults(handler=lambda _args: _missing_action())


def _missing_action() -> int:
    raise UsageError("cmx repo: give an action: add, list, update or rm")


def _row(repo: Repo) -> dict[str, Any]:
    return {"name": repo.name, "url": repo.url, "ref": repo.ref, "commit": repo.commit, "kind": repo.kind,
            "added_at": repo.added_at, "updated_at": repo.updated_at}


def _loaded(repo: Repo) -> tuple[int, list[str]]:
    """The repository's recipes in the catalog (shadowed ones included), and the errors of
    its files that fail to load (naming the user's files: :func:`repo_sources.origins`)."""
    label = f"repo:{repo.name}"
    catalog = session_catalog()  # not open_session: under --strict a broken file would end the add half-done
    items = [*catalog.listed.values(), *(i for group in catalog.shadowed_listed.values() for i in group)]
    tree = str(store.tree(repo.name, repo.commit)) + os.sep
    return (sum(1 for item in items if item.source == label),
            [message for path, message in catalog.errors.items() if path.startswith(tree)])


def cmd_add(args: argparse.Namespace) -> int:
    repo = store.add(args.source, args.ref, args.name, classifier(get_registry()))
    count, broken = _loaded(repo)
    if count == 0:
        store.remove(repo.name)
        if broken:
            more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
            raise UsageError(f"repo add {args.source}: none of its recipe files loads at {repo.commit[:SHORT]}: "
                             f"{broken[0]}{more}; fix them and add it again; nothing was added")
        raise UsageError(f"repo add {args.source}: no recipes in it at {repo.commit[:SHORT]} (neither cmx "
                         "recipe files nor a collection a loaded plugin translates); nothing was added")
    for message in broken:
        print(f"cmx: warning: {repo.name}: a recipe file does not load: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({**_row(repo), "recipes": count}, indent=2))
    elif not args.quiet:
        print_fitted(f"added {repo.name} at {repo.commit[:SHORT]} ({count} recipes, {repo.kind}) from {repo.url}",
                     args.wide)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    repos = read_repos()
    fmt = chosen_format(args.format, args.json)
    if fmt == "json":
        print(json.dumps({"repos": [_row(r) for r in repos]}, indent=2))
        return 0
    rows = tuple((r.name, r.commit[:SHORT], r.kind, r.ref or "HEAD", r.url) for r in repos)
    render(Listing("recipe repositories", ("NAME", "COMMIT", "KIND", "REF", "SOURCE"), rows,
                   whole=frozenset({"NAME", "COMMIT"}), drop=("REF", "KIND")), fmt, width=width_for(args.wide))
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else [r.name for r in read_repos()]
    classify = classifier(get_registry())
    moves = [store.update(name, classify) for name in names]
    if args.json:
        print(json.dumps({"updated": [{"name": after.name, "from": before.commit, "to": after.commit}
                                      for before, after in moves]}, indent=2))
        return 0
    for before, after in moves:
        if before.commit == after.commit:
            print_fitted(f"{after.name}: up to date at {after.commit[:SHORT]}", args.wide)
        else:
            print_fitted(f"{after.name}: {before.commit[:SHORT]} -> {after.commit[:SHORT]}", args.wide)
    if not moves:
        print("no repositories added; add one with: cmx repo add URL|PATH")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    repo = store.remove(args.name)
    if args.json:
        print(json.dumps({"removed": _row(repo)}, indent=2))
    else:
        print_fitted(f"removed {repo.name} (was at {repo.commit[:SHORT]})", args.wide)
    return 0
