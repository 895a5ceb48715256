"""``cmx cm run|explain script --tags=TAGS [--env.KEY=VALUE ...] [--KEY=VALUE ...] [-v] [--json]``: CM's
own command line over an imported collection (``--recipes DIR``) or the live ``CMX_CM_PATH``.

* ``--tags`` are CM tags: plain tags select scripts, ``_name`` their variations. When several
  scripts match, CM's own choice rule picks one (quiet mode: the lowest ``sort``, then the
  path), and stderr says which and why; a variation name never matches a script's tag (so
  ``get,cmake`` is get-cmake, not get-generic-sys-util's ``_cmake``).
* ``--env.KEY=VALUE`` sets any env key of the script, declared or not (the ``cm_env`` input).
* ``--KEY=VALUE`` are the script's inputs (``input_mapping`` names, ``version_min``...).

Then it hands over to ``cmx run recipe`` in the same process (:class:`~cmx_core.errors.HandOver`:
the plugins and the interpreter already loaded, where an ``exec`` started both again), pinned
to the chosen script's recipe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from cmx_cm.collection import STAMPS, live_paths
from cmx_cm.index import IndexEntry, ScriptIndex, recipe_name_of, split_tags
from cmx_core.api import cache_dir, cached_recipes
from cmx_core.api.display import fit_text, width_for
from cmx_core.errors import HandOver, UsageError

PASS_FLAGS = ("-v", "--verbose", "-q", "--quiet", "-s", "--json", "--wide", "--no-cache", "--refresh")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["run", "explain"],
                        help="run (as CM's 'cm run script'), or explain: which script CM's rule takes and why, "
                             "then cmx's explanation of its plan")
    parser.add_argument("noun", choices=["script"], help="script")
    parser.add_argument("rest", nargs=argparse.REMAINDER,
                        help="--tags=TAGS, --recipes DIR, --env.KEY=VALUE, --KEY=VALUE, -v, --json, --wide")


def _split(rest: list[str]) -> tuple[str, list[str], dict[str, str], list[str], list[str]]:
    tags, recipes, inputs, flags = "", list[str](), list[str](), list[str]()
    env: dict[str, str] = {}
    pending = list(rest)
    while pending:
        arg = pending.pop(0)
        if arg in PASS_FLAGS:
            flags.append(arg)
        elif arg in ("--tags", "--recipes") and pending:
            value = pending.pop(0)
            tags, recipes = (value, recipes) if arg == "--tags" else (tags, [*recipes, value])
        elif arg.startswith("--tags="):
            tags = arg.split("=", 1)[1]
        elif arg.startswith("--recipes="):
            recipes.append(arg.split("=", 1)[1])
        elif arg.startswith("--env.") and "=" in arg:
            key, value = arg[len("--env."):].split("=", 1)
            if not key:
                raise UsageError(f"{arg!r}: expected --env.KEY=VALUE")
            env[key] = value
        elif arg.startswith("--") and "=" in arg:
            inputs.append(arg)
        else:
            raise UsageError(f"cmx cm run script: unrecognized argument {arg!r} (expected --tags=..., --env.KEY=VALUE "
                             "or --KEY=VALUE)")
    if not any(t.strip() for t in tags.split(",")):
        raise UsageError("cmx cm run script: --tags=TAGS is required (CM tags, _name for a variation)")
    return tags, recipes, env, inputs, flags


def _recipe_dirs(recipes: list[str]) -> list[Path]:
    dirs = [Path(r) for r in recipes]
    if not dirs and os.environ.get("CMX_CM_PATH", "").strip():
        dirs = live_paths(os.environ["CMX_CM_PATH"], cache_dir())
    if not dirs:
        raise UsageError("cmx cm run script: give --recipes DIR (from 'cmx import cm') or set CMX_CM_PATH")
    return dirs


def choose(tags: str, dirs: list[Path]) -> tuple[Any, list[Any], Path]:
    """The script CM would run for ``tags`` over the collections' indexes, the other matches in
    CM's order, and the recipe directory holding it."""
    query = split_tags([t.strip() for t in tags.split(",") if t.strip()])
    for directory in dirs:
        found = ScriptIndex(_index_entries(directory)).select(query)
        if found:
            return found[0], found[1:], directory
    raise UsageError(f"no CM script has tags '{tags}' (plain tags are script tags, _name a variation); "
                     f"looked in {', '.join(str(d) for d in dirs)}")


def _index_entries(directory: Path) -> list[IndexEntry]:
    """The script index an import recorded in ``directory``'s stamps.json; a missing or damaged
    one is a one-line error saying to import again."""
    stamps = directory / STAMPS
    again = f"import the collection with 'cmx import cm DIR --out {directory}'"
    if not directory.is_dir():
        raise UsageError(f"--recipes {directory}: not a directory; {again}")
    if not stamps.is_file():
        raise UsageError(f"{directory}: no {STAMPS}; {again}")
    try:
        stored = json.loads(stamps.read_text(encoding="utf-8"))
        return [IndexEntry.from_json(s["entry"]) for s in stored["scripts"].values() if "entry" in s]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UsageError(f"{stamps}: not as an import writes it ({type(exc).__name__}); {again}") from None


def _flavor(directory: Path, entry: IndexEntry) -> str:
    """``mlc`` for an MLC script's recipe (``mlc.*``), else ``cm``."""
    return "mlc" if (directory / f"mlc.{entry.alias}.yaml").is_file() else "cm"


def prefer_cached(found: list[IndexEntry], directory: Path) -> tuple[list[IndexEntry], list[str]]:
    """CM's warm-cache rule before its order: where several scripts match and some have a
    cache entry (here: a valid entry of their recipe in cmx's cache), only those are kept,
    in CM's order. The matches, and the aliases of those with an entry."""
    if len(found) < 2:
        return found, []
    names = {entry.alias: recipe_name_of(_flavor(directory, entry), entry.alias) for entry in found}
    cached = cached_recipes(names.values())
    kept = [entry for entry in found if names[entry.alias] in cached]
    return (kept or found), [entry.alias for entry in kept]


def _choice_line(tags: str, found: list[IndexEntry], kept: list[IndexEntry], cached: list[str]) -> str:
    chosen = kept[0]
    others = [entry for entry in found if entry is not chosen]
    names = ", ".join(f"{e.alias} (sort {e.sort})" for e in others) or "no other"
    rule = "the lowest sort, then the path"
    if cached:
        rule = f"of those in the cache ({', '.join(cached)}; CM prefers a cached script), {rule}"
    return (f"cmx-cm: tags '{tags}' match {len(found)} scripts; took {chosen.alias} (sort {chosen.sort}, "
            f"{chosen.path}) by CM's rule in quiet mode: {rule}; not {names}")


def run(args: argparse.Namespace) -> NoReturn:
    rest = list(args.rest or [])
    if getattr(args, "json", False):
        rest.append("--json")
    if getattr(args, "wide", False) and "--wide" not in rest:
        rest.append("--wide")
    tags, recipes, env, inputs, flags = _split(rest)
    dirs = _recipe_dirs(recipes)
    first, others, directory = choose(tags, dirs)
    found = [first, *others]
    kept, cached = prefer_cached(found, directory)
    chosen = kept[0]
    explaining = args.action == "explain"
    if others or explaining:
        line = _choice_line(tags, found, kept, cached)
        if explaining and "--json" not in flags:  # explain's first paragraph, for a person: fitted
            print(fit_text(line, width_for("--wide" in flags)), flush=True)
        else:  # a log line on stderr: one line, as errors are
            print(line, file=sys.stderr, flush=True)
    variations = [t.strip()[1:] for t in tags.split(",") if t.strip().startswith("_")]
    command = ["explain"] if explaining else ["run", "recipe"]
    flavor = _flavor(directory, chosen)
    argv = [*command, f"--tags={flavor},{chosen.alias},{','.join(variations)}".rstrip(","), "--recipes",
            str(directory), *flags, *inputs]
    if env:
        argv.append("--cm_env=" + json.dumps(env, sort_keys=True))
    raise HandOver(argv, depends_on=_choice_read(recipes, dirs) if not (others or explaining) else None)


def _choice_read(recipes: list[str], dirs: list[Path]) -> list[str] | None:
    """What a choice with a single match read, for the CLI to remember it by: each imported
    collection's index and the code that chose. None for a live ``CMX_CM_PATH``, which this
    command translates again when its collection changes (and a memo would skip that); a
    choice among several matches is never remembered (it read the cache, which changes)."""
    if not recipes:
        return None
    return [*(str(d / STAMPS) for d in dirs), __file__, sys.modules[ScriptIndex.__module__].__file__ or ""]
