"""``cmx run``, ``plan``, ``explain``, ``list`` and ``show``: parse, call the API, print."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from cmx_core.cli.monitor_cmd import add_telemetry_options, print_soak, telemetry_settings
from cmx_core.cli.progress import Progress
from cmx_core.cli.recipe_doc import recipe_json, recipe_text
from cmx_core.cli.recovery_opts import add_recovery_options, recovery
from cmx_core.cli.repeats_cmd import check_runs, run_repeats
from cmx_core.errors import UsageError, escape_controls
from cmx_core.plan.conditional import of_node
from cmx_core.plan.handoff import FLAG as HANDOFF_FLAG
from cmx_core.plan.handoff import read_plan
from cmx_core.plan.planner import Plan
from cmx_core.plugins.loader import get_registry
from cmx_core.resolve.env_args import ENV_PREFIX
from cmx_core.resolve.input_hints import unknown_flag
from cmx_core.results.grid import Column, Grid, fit, fit_text, width_for
from cmx_core.results.summary import run_summary
from cmx_core.run.drift import DRIFT_CLASSES
from cmx_core.run.engine import explain, list_recipes, plan_view, run, show_recipe
from cmx_core.run.replay import disabled
from cmx_core.run.replay_record import Recorder
from cmx_core.run.request import RunRequest

NOUNS = ("recipe", "script")
"""The optional word after ``run``, ``plan`` and ``explain``: ``cmx run recipe ...``, or
``cmx run script ...`` as CM and MLC users type it (an alias)."""


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """All of this module's commands."""
    for add in (add_run, add_plan, add_explain, add_list, add_show):
        add(sub, common)


def add_run(sub: Any, common: argparse.ArgumentParser) -> None:
    run = sub.add_parser("run", parents=[common], help="resolve and run a recipe",
                         description="Resolve the recipe selected by --tags (or named, or given as "
                         "words: cmx run recipe \"detect os\") and run it. Inputs: --KEY=VALUE or "
                         "--KEY VALUE for the recipe's declared inputs (or --input.KEY=VALUE).")
    run.usage = "cmx run [recipe | script] [NAME | TAGS] [--tags TAGS] [options] [--KEY=VALUE | --KEY VALUE ...]"
    _query_options(run, required=False)
    run.add_argument("-j", "--jobs", type=int, default=1, help="independent nodes to run in parallel")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    run.add_argument("--refresh", action="store_true", help="recompute cached nodes and replace their entries")
    run.add_argument("--output", metavar="DIR", help="run directory (default: in the cmx data dir)")
    _executor_options(run)
    run.add_argument("--lock", metavar="FILE", help="replay a run's lock.json; refuse if anything resolves differently")
    run.add_argument("--runs", type=int, default=1, metavar="N",
                     help="run N times (each a stored run) and report each metric's mean, median, 95%% CI, CV "
                          "and outliers (docs/busy-machine.md; a recipe input named repeats is --repeats)")

    run.add_argument("--allow-drift", action="append", default=[], metavar="CLASS", choices=sorted(DRIFT_CLASSES),
                     help="with --lock: let this class of drift through: " + "; ".join(
                         f"{name}: {why.split(':')[0]}" for name, why in sorted(DRIFT_CLASSES.items())))
    run.add_argument("--sweep-point", metavar="JSON", help=argparse.SUPPRESS)  # set by `cmx sweep`
    run.add_argument(HANDOFF_FLAG, action="store_true", help=argparse.SUPPRESS)  # set by `cmx sweep`

    add_telemetry_options(run)
    add_recovery_options(run)
    run.set_defaults(handler=cmd_run, accepts_inputs=True)


def add_plan(sub: Any, common: argparse.ArgumentParser) -> None:
    plan = sub.add_parser("plan", parents=[common], help="print the resolved plan without running it")
    plan.add_argument("noun", nargs="?", choices=NOUNS, help=argparse.SUPPRESS)
    _query_options(plan)
    _executor_options(plan)
    plan.set_defaults(handler=cmd_plan, accepts_inputs=True)


def _executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", default=None,
                        help="where to run: local, or a plugin's (default: docker when the recipe "
                             "declares a container, else local)")
    parser.add_argument("--container", action="store_true", help="run inside the recipe's container (executor docker)")
    parser.add_argument("--executor-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the executor, e.g. memory=8g, cpus=2, gpus=all (repeatable; "
                             "'cmx plugins info NAME' lists them)")


def add_explain(sub: Any, common: argparse.ArgumentParser) -> None:
    explain = sub.add_parser("explain", parents=[common], help="why each recipe, variation and cache decision")
    explain.add_argument("noun", nargs="?", choices=NOUNS, help=argparse.SUPPRESS)
    _query_options(explain)
    explain.set_defaults(handler=cmd_explain, accepts_inputs=True)


def add_list(sub: Any, common: argparse.ArgumentParser) -> None:
    listing = sub.add_parser("list", parents=[common], help="list recipes")
    listing.add_argument("noun", choices=["recipes"], help="what to list")
    listing.add_argument("--tags", default="", help="only recipes having all these tags")
    listing.set_defaults(handler=cmd_list)


def add_show(sub: Any, common: argparse.ArgumentParser) -> None:
    show = sub.add_parser("show", parents=[common], help="show a recipe's documentation")
    show.add_argument("noun", choices=["recipe"])
    show.add_argument("name")
    show.set_defaults(handler=cmd_show)


def _query_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--tags", required=required, help="comma-separated tags; variation names select variations")
    parser.add_argument("--facts", metavar="FILE", help="use a saved facts file instead of probing this machine")


def parse_inputs(extra: list[str]) -> dict[str, str]:
    """``--input.KEY=VALUE``, ``--KEY=VALUE`` and ``--KEY VALUE`` arguments as a dict;
    ``--env.KEY=VALUE`` is kept as ``env.KEY`` for the resolver (cmx_core.resolve.env_args)."""
    inputs: dict[str, str] = {}
    pending = list(extra)
    while pending:
        arg = pending.pop(0)
        if arg.startswith("--") and "=" not in arg and pending and not pending[0].startswith("-"):
            arg = f"{arg}={pending.pop(0)}"
        if arg.startswith("--") and "=" not in arg:
            raise UsageError(unknown_flag(arg))
        if not arg.startswith("--"):
            raise UsageError(f"unrecognized argument {arg!r}: recipe inputs are given as --KEY=VALUE or --KEY VALUE")
        key, value = arg[2:].split("=", 1)
        if key.startswith(ENV_PREFIX):  # kept as typed: the resolver gives it to a step that takes env
            inputs[key] = value
            continue
        key = key[len("input."):] if key.startswith("input.") else key
        if not key:
            raise UsageError(f"empty input name in {arg!r}")
        key = key.replace("-", "_")
        if key in inputs and inputs[key] != value:
            raise UsageError(f"input '{key}' is given twice, as {inputs[key]!r} and {value!r}; give it once")
        if key in inputs:
            print(f"cmx: warning: input '{key}' is given twice (both {value!r}); once is enough", file=sys.stderr)
        inputs[key] = value
    return inputs


def split_words(extra: list[str]) -> tuple[list[str], list[str]]:
    """The bare words (a recipe name or tags) and the input arguments of ``extra``; the
    word after a ``--KEY`` without ``=`` is that input's value."""
    words: list[str] = []
    rest: list[str] = []
    pending = list(extra)
    while pending:
        arg = pending.pop(0)
        if arg.startswith("-"):
            rest.append(arg)
            if arg.startswith("--") and "=" not in arg and pending and not pending[0].startswith("-"):
                rest.append(pending.pop(0))
        else:
            words.append(arg)
    return words, rest


def positional_tags(words: list[str], recipes_dirs: list[str]) -> str | None:
    """The tags of ``cmx run [recipe] NAME|TAGS``: a recipe's name gives that recipe's tags;
    other words are tags (``"detect os"``, ``detect,os``). None when there are no words."""
    if words[:1] and words[0] in NOUNS:
        words = words[1:]
    tags = [t for word in words for t in word.replace(",", " ").split()]
    if not tags:
        return None
    if len(tags) == 1:
        try:
            return ",".join(show_recipe(tags[0], recipes_dirs=recipes_dirs).tags)
        except UsageError:
            pass  # not a recipe name: a tag
    return ",".join(tags)


def parse_executor_options(pairs: list[str]) -> dict[str, str]:
    """``--executor-opt KEY=VALUE`` arguments as a dict."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--executor-opt {pair!r}: expected KEY=VALUE, e.g. memory=8g")
        options[key.strip()] = value
    return options


def cmd_plan(args: argparse.Namespace) -> int:
    result = plan_view(args.tags, parse_inputs(args.extra), recipes_dirs=args.recipes, facts_file=args.facts,
                       executor="docker" if args.container else args.executor,
                       options=parse_executor_options(args.executor_opt))
    if args.json:
        _print_json(result.to_json())
    else:
        print(fit_text(result.render_text(), width_for(args.wide)))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    result = explain(args.tags, parse_inputs(args.extra), recipes_dirs=args.recipes, facts_file=args.facts)
    if args.json:
        _print_json(result.to_json())
    else:
        print(fit_text(_explain_text(result), width_for(args.wide)))
    return 2 if result.error else 0


def _explain_text(result: Any) -> str:
    lines: list[str] = []
    shown: set[str | None] = set()
    for decision in result.decisions:
        chain = " > ".join(decision.chain) or "query"
        lines.append(f"{chain}: tags {','.join(decision.query)} -> {decision.node_id or 'unresolved'}")
        for c in decision.candidates:
            mark = "taken   " if c.accepted else "rejected"
            lines.append(f"  {mark} {c.name} [{c.source}]: {c.reason}")
        for name, why in decision.variations:
            lines.append(f"  variation {name}: {why}")
        for what, why in decision.skipped:
            lines.append(f"  skipped {what}: {why}")
        for alias, why in decision.chosen:
            lines.append(f"  dep {alias}: {why}")
        if decision.node_id not in shown:  # a shared node's conditional deps once
            shown.add(decision.node_id)
            conditional = of_node(result.conditional, decision.node_id or "")
            lines += [f"  conditional dep {dep.describe()}" for dep in conditional]
    if result.plan is not None:
        lines.append("cache:")
        for node in result.plan.nodes:
            lines.append(f"  {node.id}: {node.cache_status}" + (f" ({node.cache_reason})" if node.cache_reason else ""))
            for reason in result.misses.get(node.id, []):
                lines.append(f"    {reason}")
    if result.error:
        lines.append(f"error: {result.error}")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    executor = "docker" if args.container else args.executor
    words, args.extra = split_words(args.extra)
    named = positional_tags(words, args.recipes)
    if named is not None and args.tags:
        stray = " ".join(words[1:] if words[:1] and words[0] in NOUNS else words)
        raise UsageError(f"cmx run: unrecognized argument {stray!r} next to --tags: give tags as "
                         "words (cmx run recipe \"detect os\") or as --tags, not both")
    args.tags = args.tags or named
    if not args.tags and not args.lock:
        raise UsageError("cmx run: give --tags=... (or --lock FILE to replay a run)")
    if args.lock and (args.tags or args.extra):
        raise UsageError("cmx run: --lock replays the lockfile's own tags and inputs; drop --tags and inputs")

    check_runs(args)
    planned = _handed_plan(args)
    telemetry = telemetry_settings(args)
    observer = _replay_observer(args)
    request = RunRequest(
        args.tags, parse_inputs(args.extra), recipes_dirs=args.recipes, facts_file=args.facts,
        jobs=args.jobs, use_cache=not args.no_cache, refresh=args.refresh,
        output=args.output, executor=executor, lock=args.lock, allow_drift=args.allow_drift,
        options=parse_executor_options(args.executor_opt), sweep=_sweep_point(args.sweep_point),
        telemetry=telemetry, recovery=recovery(args), planned=planned)
    with Progress(enabled=not args.quiet, verbose=args.verbose), observer or nullcontext(), \
            stdout_reserved(True):
        result = run(request, on_plan=_plan_printer(args))
    if observer is not None:
        observer.remember(result)
    if args.runs > 1:
        return run_repeats(args, result, lambda: _run_again(args, request))

    print_soak(result.document)
    if args.json:
        _print_json(result.document)
    else:
        # its last line, `result: PATH`, is read by scripts
        print(run_summary(result.document, result.result_path, width_for(args.wide)))
    return 0


def _run_again(args: argparse.Namespace, request: RunRequest) -> Any:
    """One more run of ``--runs N`` (progress and stdout as for the first)."""
    with Progress(enabled=not args.quiet, verbose=args.verbose), stdout_reserved(True):
        return run(request)


def _handed_plan(args: argparse.Namespace) -> Plan | None:
    """The plan ``cmx sweep`` wrote to this point's standard input (``--plan-on-stdin``),
    after which standard input is /dev/null again, as for any run; None without the option."""
    if not args.plan_on_stdin:
        return None
    if args.lock:
        raise UsageError(f"cmx run: {HANDOFF_FLAG} and --lock: give one")
    the_plan = read_plan(sys.stdin.buffer)
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    return the_plan


def _plan_printer(args: argparse.Namespace) -> Callable[[Any], None] | None:
    """On a terminal, ``cmx run`` shows the plan before it runs anything, as CM and MLC users
    expect (``-q``/``--json`` or a pipe keep stderr to the progress lines)."""
    if args.json or args.quiet or not sys.stderr.isatty():
        return None

    def show(the_plan: Any) -> None:
        print(f"plan ({len(the_plan.nodes)} nodes; 'cmx plan' shows every step's settings):\n"
              f"{fit_text(the_plan.render_tree(), width_for(args.wide))}", file=sys.stderr, flush=True)
    return show


def _sweep_point(text: str | None) -> dict[str, Any] | None:
    """The ``--sweep-point`` JSON ``cmx sweep`` hands each point's run."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not (isinstance(value, dict) and isinstance(value.get("id"), str) and isinstance(value.get("index"), int)
            and isinstance(value.get("point"), dict)):
        raise UsageError('--sweep-point: expected {"id": "sw-...", "index": N, "point": {...}} (set by cmx sweep)')
    return value


def _replay_observer(args: argparse.Namespace) -> Any:
    """A recorder for the warm-run memo (see cmx_core.run.replay) when this invocation is one the
    replay can reproduce: the default cache, executor and run directory, no facts file."""
    if disabled() or args.replay_key is None or args.no_cache or args.runs > 1 \
            or args.refresh or args.lock or args.facts or args.output or args.sweep_point \
            or args.executor not in (None, "local") \
            or args.container or args.executor_opt:
        return None

    return Recorder(args.argv, args.replay_key, args.recipes, get_registry(), json_output=args.json,
                    verbose=args.verbose)


def cmd_list(args: argparse.Namespace) -> int:
    errors: list[str] = []
    recipes = list_recipes(args.tags, recipes_dirs=args.recipes, errors=errors)
    for error in errors:  # the good recipes are still listed; broken files make it exit 2
        print(f"cmx: error: {error}", file=sys.stderr)
    if args.json:
        _print_json([{"name": r.name, "version": r.version, "tags": list(r.tags), "summary": r.summary,
                      "source": r.source, "path": str(r.path)} for r in recipes])
        return 2 if errors else 0
    sys.stdout.write(fit(recipes_grid(recipes), width_for(args.wide)).text())
    return 2 if errors else 0


def recipes_grid(recipes: list[Any]) -> Grid:
    """Name, tags and summary; the tags and summary are cut on a narrow terminal (no header,
    as ``cmx list`` has always printed: one recipe a row)."""
    columns = (Column("name", whole=True), Column("tags"), Column("summary"))
    return Grid(columns, tuple((r.name, ",".join(r.tags), r.summary) for r in recipes), header=False)


def cmd_show(args: argparse.Namespace) -> int:
    recipe = show_recipe(args.name, recipes_dirs=args.recipes)
    if args.json:
        _print_json(recipe_json(recipe))
    else:
        print(escape_controls(recipe_text(recipe, width_for(args.wide))))
    return 0


@contextmanager
def stdout_reserved(enabled: bool) -> Iterator[None]:
    """Keep stdout for what ``cmx run`` prints (the one ``--json`` document, or the summary):
    while the run goes on, both ``sys.stdout`` and file descriptor 1 point at stderr, so
    whatever a step, a plugin or a child process writes to "stdout" lands in the log
    stream; the real stdout comes back afterwards.

    This is done once, by the CLI, before any step runs, and undone after the last one: no
    step redirects anything, so parallel steps (``-j N``) cannot race over it."""
    if not enabled:
        yield
        return
    real = sys.stdout
    real.flush()
    saved = _dup_stdout()
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stdout = real
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _dup_stdout() -> int | None:
    """Point descriptor 1 at descriptor 2 and return a copy of the old one (None when the
    process has no usable descriptors 1 and 2, as under some embedders)."""
    try:
        saved = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        return None
    return saved


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")
