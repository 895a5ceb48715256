"""``cmx cache list|show|rm|prune|verify``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cmx_core.cache.store import Cache
from cmx_core.cli.handover_memo import prune as prune_handovers
from cmx_core.errors import UsageError
from cmx_core.plugins.loader import prune_resources
from cmx_core.recipes.model import parse_duration
from cmx_core.results.grid import Column, Grid, fit, fit_text, print_fitted, width_for
from cmx_core.run.replay import prune_memos


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cache = sub.add_parser("cache", parents=[common], help="inspect and clean the cache")
    actions = cache.add_subparsers(dest="action", metavar="ACTION", parser_class=type(cache))
    listing = actions.add_parser("list", parents=[common], help="list entries")
    listing.add_argument("--recipe", help="only entries of this recipe")
    listing.set_defaults(handler=cmd_list)
    show = actions.add_parser("show", parents=[common], help="show one entry")
    show.add_argument("key", help="the key or a unique prefix")
    show.set_defaults(handler=cmd_show)
    rm = actions.add_parser("rm", parents=[common], help="remove entries")
    rm.add_argument("keys", nargs="*", help="keys or unique prefixes")
    rm.add_argument("--recipe", help="remove every entry of this recipe")
    rm.add_argument("--all", action="store_true", help="remove every entry")
    rm.set_defaults(handler=cmd_rm)
    prune = actions.add_parser("prune", parents=[common], help="remove invalid, corrupt and old entries")
    prune.add_argument("--older-than", metavar="AGE", help="also entries older than AGE (e.g. 7d, 12h)")
    prune.add_argument("--images", action="store_true",
                       help="also remove what plugins keep outside the cache (cmx-docker: images) that no entry "
                            "references")
    prune.add_argument("--dry-run", action="store_true", help="with --images: list what would be removed")
    prune.set_defaults(handler=cmd_prune)
    add_verify(actions, common)


def add_verify(actions: Any, common: argparse.ArgumentParser) -> None:
    verify = actions.add_parser("verify", parents=[common],
                                help="check entries' metadata and output digests (exit 1 if one fails)")
    verify.add_argument("key", nargs="?", help="the key or a unique prefix (default: every entry)")
    verify.set_defaults(handler=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    """Re-hash each entry's declared outputs against the digests recorded when it was written."""
    cache = Cache()
    entries = [cache.find(args.key)] if args.key else cache.entries()
    report = [{"key": e.key, "recipe": e.recipe, "path": str(e.path), "problems": cache.verify(e)} for e in entries]
    bad = [r for r in report if r["problems"]]
    if args.json:
        print(json.dumps({"checked": len(report), "failed": len(bad), "entries": report}, indent=2))
    else:
        grid = Grid((Column("key", whole=True), Column("recipe"), Column("verdict")),
                    tuple((str(r["key"])[:16], str(r["recipe"]), "; ".join(r["problems"]) or "ok") for r in report),
                    header=False)
        sys.stdout.write(fit(grid, width_for(args.wide)).text())
        print_fitted(f"{len(report)} checked, {len(bad)} failed", args.wide)
    for row in bad:
        print(f"cmx: error: cache entry {row['key']} ({row['path']}): {row['problems'][0]}; "
              f"remove it with: cmx cache rm {row['key']}", file=sys.stderr)
    return 1 if bad else 0


def _row(entry: Any) -> dict[str, Any]:
    return {"key": entry.key, "recipe": entry.recipe, "node": entry.meta.get("node"),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.created)),
            "path": str(entry.path)}


def cmd_list(args: argparse.Namespace) -> int:
    entries = [e for e in Cache().entries() if not args.recipe or e.recipe == args.recipe]
    rows = [_row(e) for e in entries]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        grid = Grid((Column("key", whole=True), Column("created", whole=True, drop=1), Column("recipe")),
                    tuple((r["key"][:16], r["created"], r["recipe"]) for r in rows), header=False)
        sys.stdout.write(fit(grid, width_for(args.wide)).text())
        print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    entry = Cache().find(args.key)
    doc = {**_row(entry), "meta": entry.meta, "size_bytes": entry.size_bytes()}
    print(json.dumps(doc, indent=2, default=str))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    cache = Cache()
    if args.all:
        targets = cache.entries()
    elif args.recipe:
        targets = [e for e in cache.entries() if e.recipe == args.recipe]
    elif args.keys:
        targets = [cache.find(k) for k in args.keys]
    else:
        raise UsageError("cmx cache rm: give keys, --recipe NAME or --all")
    for entry in targets:
        cache.remove(entry)
    _report(args, "removed", targets)
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    age = None
    if args.older_than is not None:
        age = parse_duration(args.older_than)
        if age is None:
            raise UsageError(f"--older-than {args.older_than!r}: expected a duration like 7d or 12h")
    cache = Cache()
    removed = cache.prune(older_than_s=age)

    prune_memos(str(cache.root), older_than_s=age)
    prune_handovers(str(cache.root), older_than_s=age)
    resources = _prune_resources(cache, args.dry_run) if args.images else None
    if args.json:
        doc: dict[str, Any] = {"pruned": [e.key for e in removed]}
        if resources is not None:
            doc["resources"] = resources
        print(json.dumps(doc))
        return 0
    _report(args, "pruned", removed)
    for line in resources or ():
        print(fit_text(f"{'would remove' if args.dry_run else 'removed'} {line}", width_for(args.wide)))
    return 0


def _prune_resources(cache: Any, dry_run: bool) -> list[str]:
    """The plugins' ``cmx_prune_resources`` with every string the remaining entries' outputs hold."""
    referenced: set[str] = set()
    for entry in cache.entries():
        _strings(entry.outputs, referenced)
    return prune_resources(frozenset(referenced), dry_run=dry_run)


def _strings(value: Any, into: set[str]) -> None:
    if isinstance(value, str):
        into.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, into)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _strings(item, into)


def _report(args: argparse.Namespace, verb: str, entries: list[Any]) -> None:
    if args.json:
        print(json.dumps({verb: [e.key for e in entries]}))
    else:
        print_fitted(f"{verb} {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", args.wide)
