"""``cmx results list|show|compare|export|reindex|report|plot``: a thin layer over :mod:`cmx_core.results`.

With ``--json`` every subcommand prints exactly one JSON document on stdout; otherwise a
human table (rich, imported only then). Messages go to stderr. Errors are
:class:`cmx_core.errors.CmxError` subclasses, raised for ``cmx``'s main to print as one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core import paths
from cmx_core.cli.export_dest import STDOUT, select_runs, write_export
from cmx_core.cli.listing import Listing, add_format_option, chosen_format, render
from cmx_core.cli.predict_cmd import add_parsers as add_predict_parsers
from cmx_core.cli.run_rows import listing, row_json
from cmx_core.errors import ResultsError, UsageError
from cmx_core.report import cli
from cmx_core.report.cli import add_plot, add_report
from cmx_core.report.columns import column_documents
from cmx_core.results.comparability import differences, forced_warnings, refusal
from cmx_core.results.compare import ACROSS_HELP, across_of, compare_samples, config_label
from cmx_core.results.faults import attempt_lines, fault_report
from cmx_core.results.grid import Column, Grid, fit, fit_text, print_fitted, width_for
from cmx_core.results.numbers import fmt_number
from cmx_core.results.store import ResultStore
from cmx_core.results.summary import metric_text, reason_lines, telemetry_lines
from cmx_core.results.sweep_table import sweep_table
from cmx_core.run.inflight import reap
from cmx_core.sweep.runner import read_manifest

if TYPE_CHECKING:
    from cmx_core.cli.listing import Listing
    from cmx_core.results.compare import Cell, Comparison
    from cmx_core.results.store import ResultStore

STATUSES = ("valid", "invalid", "error", "partial", "completed")
_STATUS_STYLE = {"valid": "green", "invalid": "red", "error": "bold red", "partial": "yellow"}
_VERDICT_STYLE = {
    "better": "green", "worse": "red", "same": "dim", "missing": "dim",
    "units differ": "yellow", "direction differs": "yellow", "baseline": "bold", "within noise": "cyan",
    "inconclusive": "yellow", "other series": "dim",
}


SHORT_ID = 12
"""Characters of a run id shown in tables (prefixes are accepted everywhere; --json has it all)."""

ALL_RUNS = 2**62
"""The limit ``--limit 0`` stands for."""


def add_parser(subparsers: Any, common: argparse.ArgumentParser | None = None) -> None:
    """Add ``results`` and its subcommands to ``cmx``'s subparsers; each sets ``handler``.

    ``common`` (optional) is a parent parser of options every command takes (``--json``,
    ``-v``...); without it each subcommand gets its own ``--json``.
    """
    parents = [common] if common is not None else []
    parser = subparsers.add_parser(
        "results", help="list, show, compare, export and predict run results",
        description="Runs indexed in the results database (run ids may be unique prefixes).",
    )
    sub = parser.add_subparsers(dest="results_command", metavar="COMMAND", required=True)
    leaf = {"parents": parents}

    p = sub.add_parser("list", help="the newest runs", **leaf)
    p.add_argument("--limit", type=int, default=20, help="how many runs (default 20; 0: all of them)")
    p.add_argument("--recipe", help="only runs of this recipe")
    p.add_argument("--status", choices=STATUSES, help="only runs with this status")

    add_format_option(p)
    _finish(p, cmd_list)

    p = sub.add_parser("show", help="one run's result document", **leaf)
    p.add_argument("run", metavar="RUN", help="run id or unique prefix")
    p.add_argument("--format", dest="format", choices=("table", "plain"), default=None,
                   help="the metrics as a table or plain lines (default: table on a wide terminal)")
    _finish(p, cmd_show)

    p = sub.add_parser("compare", help="metrics of runs side by side (the first is the baseline)", **leaf)
    p.add_argument("runs", metavar="RUN", nargs="*",
                   help="two or more run ids or prefixes; RUN,RUN,... is one column of repeats")
    p.add_argument("--sweep", metavar="ID", help="the points of a `cmx sweep`, one row per point")
    p.add_argument("--repeats", action="store_true",
                   help="add to each column the stored runs with its lock digest and hardware class "
                        "(one RUN: that run's repeats beside its replays from `cmx bundle replay`)")
    p.add_argument("--force", action="store_true",
                   help="compare runs of different recipes or suites (refused otherwise); each difference "
                        "is kept as a 'not comparable' warning")
    p.add_argument("--across", metavar="NAME[,NAME]", help=ACROSS_HELP)
    _finish(p, cmd_compare)
    _add_report_parsers(sub, leaf)
    add_predict_parsers(sub, leaf, _finish)

    p = sub.add_parser("export", help="write runs in an export format (json, csv, plugins')", **leaf)
    p.add_argument("--format", dest="format", required=True, metavar="FORMAT",
                   help="json, csv or a format registered by a plugin")
    p.add_argument("dest", metavar="DEST",
                   help="file or directory to write; - is stdout; a symlink is written through, a FIFO or "
                        "device written to, never replaced")
    p.add_argument("runs", metavar="RUN", nargs="*", help="run ids or prefixes (or use --all and the filters)")
    p.add_argument("--all", dest="every", action="store_true", help="every indexed run the filters keep")
    p.add_argument("--recipe", help="only runs of this recipe (implies --all)")
    p.add_argument("--status", choices=STATUSES, help="only runs with this status (implies --all)")
    p.add_argument("--since", metavar="WHEN",
                   help="only runs created since: a duration like 7d or 12h, or a date like 2026-12-01 (implies --all)")
    _finish(p, cmd_export)

    p = sub.add_parser("reindex", help="rebuild the index from run directories", **leaf)
    p.add_argument("dirs", metavar="DIR", nargs="*",
                   help="directories holding run directories (default: cmx's runs directory)")
    _finish(p, cmd_reindex)


def _finish(parser: argparse.ArgumentParser, handler: Any) -> None:
    if "--json" not in parser._option_string_actions:  # main.py may add it for us
        parser.add_argument("--json", action="store_true", help="print one JSON document")
    if "--wide" not in parser._option_string_actions:
        parser.add_argument("--wide", action="store_true", help="tables at their natural width, every column shown")
    parser.set_defaults(handler=handler)


def _store() -> ResultStore:
    return ResultStore(paths.results_db())


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _console() -> Any:
    from rich.console import Console  # deferred: rich only when this runs (45 modules)

    return Console(highlight=False)


# -- handlers ---------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    reap()  # runs a killed cmx left behind appear, as interrupted errors

    if args.limit < 0:
        raise UsageError(f"--limit {args.limit}: give a number of runs, or 0 for all of them")
    store = _store()
    runs = store.list(limit=args.limit or ALL_RUNS, recipe=args.recipe, status=args.status)
    fmt = chosen_format(args.format, args.json)
    if fmt == "json":
        _print_json({"runs": [row_json(r) for r in runs]})
    elif runs:
        render(listing(runs, full_ids=fmt == "csv"), fmt, width=width_for(args.wide))
    elif fmt == "csv":
        render(listing([], full_ids=True), fmt)
    elif store.list(limit=1):
        print_fitted("no runs match --recipe/--status (drop them to see every run)", args.wide)
    else:
        print("no runs indexed yet")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    stored = _store().get(args.run)
    if args.json:
        _print_json(stored.document)
    else:
        _show(stored.document, stored.path, args.format, width_for(args.wide))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.sweep:
        return _compare_sweep(args)
    if len(args.runs) < (1 if args.repeats else 2):
        raise UsageError("cmx results compare: give two or more runs, or --sweep ID")

    columns = column_documents(_store(), args.runs, with_repeats=args.repeats)
    found = differences(columns)
    if found and not args.force:
        raise UsageError(refusal(found))
    comparison = compare_samples(columns, across_of(args.across))
    if found:
        comparison = replace(comparison, warnings=(*forced_warnings(found), *comparison.warnings))
    for warning in comparison.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for run in comparison.runs[1:]:
        if run.conditions is not None and run.conditions.state != "quiet":
            print(f"note: run {run.run_id}: {run.conditions.reason}", file=sys.stderr)
    documents = [d for column in column_documents(_store(), args.runs) for d in column]
    faults = {d["run_id"]: report.to_json() for d in documents if (report := fault_report([d])) is not None}
    if args.json:
        _print_json({**comparison.to_json(), **({"fault_tolerance": faults} if faults else {})})
    else:
        sys.stdout.write(fit(_compare_grid(comparison), width_for(args.wide)).text())
        for document in documents:
            for line in _fault_lines([document], title=f"fault tolerance of {document['run_id']}"):
                print(line)
    return 0


def _point_documents(table: Any) -> list[dict[str, Any]]:
    """The stored documents of a sweep's points (a point whose run left the store has none)."""
    store, documents = _store(), []
    for row in table.rows:
        if row.run_id:
            try:
                documents.append(store.get(row.run_id).document)
            except ResultsError:
                continue
    return documents


def _fault_lines(documents: list[dict[str, Any]], title: str = "fault tolerance", expected: int | None = None,
                 with_attempts: bool = True) -> list[str]:
    """The fault-tolerance report (docs/faults.md) of a run or a sweep's points, when any had a fault."""
    report = fault_report(documents, expected)
    if report is None:
        return []
    lines = [f"  {title}:", *(f"    {line}" for line in report.lines())]
    if with_attempts and len(documents) == 1:
        lines += [f"    {line}" for line in attempt_lines(documents[0])]
    return lines


def _add_report_parsers(sub: Any, leaf: dict[str, Any]) -> None:
    """``results report`` and ``results plot`` (cmx_core/report)."""
    _finish(add_report(sub, leaf), _report_handler("report"))
    _finish(add_plot(sub, leaf), _report_handler("plot"))


def _report_handler(name: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        result: int = getattr(cli, f"cmd_{name}")(args, _store())
        return result

    return handler


def _compare_sweep(args: argparse.Namespace) -> int:
    if args.runs:
        raise UsageError("cmx results compare: give runs or --sweep ID, not both")
    table = sweep_table(read_manifest(paths.data_dir(), args.sweep), _store())
    documents = _point_documents(table)
    report = fault_report(documents, len(table.rows))
    if args.json:
        _print_json({**table.to_json(), **({"fault_tolerance": report.to_json()} if report else {})})
        return 0
    print(f"sweep {table.sweep_id} ({len(table.rows)} points)")
    sys.stdout.write(fit(table.grid(), width_for(args.wide)).text())
    for line in _fault_lines(documents, expected=len(table.rows), with_attempts=False):
        print_fitted(line, args.wide)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.dest == STDOUT and args.json:
        raise UsageError("cmx results export: DEST '-' writes the export to stdout; drop --json")
    results = select_runs(_store(), args.runs, every=args.every, recipe=args.recipe, status=args.status,
                          since=args.since)
    written = write_export(args.format, args.dest, results)
    if args.json:
        _print_json({"format": args.format, "dest": written, "runs": [r.run_id for r in results]})
    else:
        print_fitted(f"exported {len(results)} run(s) as {args.format} to {'stdout' if written == STDOUT else written}",
                     args.wide, file=sys.stderr if written == STDOUT else sys.stdout)
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    reap()  # a run directory a killed cmx left is recorded as interrupted, then indexed
    store = _store()
    dirs = [Path(d) for d in args.dirs] or [paths.runs_dir()]
    report = store.reindex(dirs)
    for path, reason in report.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    if args.json:
        _print_json({"database": str(store.path), "dirs": [str(d) for d in dirs], **report.to_json()})
    else:
        print_fitted(f"{store.path}: indexed {len(report.indexed)} run(s), dropped {len(report.dropped)} "
                     f"missing, skipped {len(report.skipped)} invalid file(s)", args.wide)
    return 0


# -- human output -----------------------------------------------------------------------

def _styled(text: str, style: str | None) -> str:
    from rich.markup import escape  # deferred: rich only when this runs (32 modules)

    return f"[{style}]{escape(text)}[/]" if style else escape(text)


def _show(document: dict[str, Any], path: Path, fmt: str | None = None, width: int | None = None) -> None:
    """The run in lines wrapped at ``width`` at their spaces (None: one line each, ``--wide``;
    a path is never split, so its own line may run longer); the metrics as a table on a wide
    terminal, plain padded lines otherwise."""
    from rich.console import Console  # deferred: rich only when this runs (45 modules)


    console = Console(highlight=False, soft_wrap=True)

    def say(text: str, style: str | None = None) -> None:
        console.print(_styled(fit_text(text, width), style))

    bench, system, timing = document["benchmark"], document["system"], document["timing"]
    status = document["status"]
    console.print(f"[bold]run {_styled(document['run_id'], None)}[/]  {_styled(status, _STATUS_STYLE.get(status))}")
    say(f"  {path}", "dim")
    for line in reason_lines(document):
        say(line, "red")
    if document["error"]:
        error = document["error"]
        say(f"  error: {error['message']} (node {error['node'] or '-'}, step {error['step'] or '-'})", "red")
    shown = {k: v for k, v in bench.items() if v is not None}
    say("  benchmark: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    accel = system["accelerator"]
    say("  system: " + f"{system['cpu']['model'] or 'cpu ?'}; "
        + (f"{accel['total_count']} x {accel['name']}" if accel else "no accelerator")
        + f"; {system['os']['distro'] or system['os']['name'] or 'os ?'}")
    say(f"  timing: {timing['started_at']} -> {timing['finished_at']} ({fmt_number(timing['wall_s'])} s)")
    for line in telemetry_lines(document):
        say(line)
    for line in _fault_lines([document]):
        say(line)
    if document["metrics"]:
        sys.stdout.flush()
        render(_metrics_listing(document), chosen_format(fmt), width=width)
    for artifact in document["artifacts"]:
        say(f"  artifact {artifact['kind']}: {artifact['path']} "
            f"({artifact['size_bytes']:,} bytes, sha256 {artifact['sha256'][:12]})")


def _metrics_listing(document: dict[str, Any]) -> Listing:
    bench, rows = document["benchmark"], []
    for name, metric in document["metrics"].items():
        mark = " *" if name == bench.get("primary_metric") else ""
        value = fmt_number(metric["value"]) if metric["value"] is not None else metric_text(name, metric, bench)
        rows.append((name + mark, value, metric["unit"],
                     "higher is better" if metric["higher_is_better"] else "lower is better"))
    return Listing("metrics", ("metric", "value", "unit", "direction"), tuple(rows), frozenset({"value"}),
                   whole=frozenset({"unit"}), drop=("direction",))


def _cell_lines(cell: Cell) -> list[str]:
    """The value and the verdict; then the change against the baseline, the spread and the
    noise note, each a line of its own (a row of the table each, so a run's column stays
    narrow and nothing is cut)."""
    lines = [fmt_number(cell.value) + ("" if cell.verdict == "baseline" else f" {cell.verdict}")]
    if cell.delta is not None and cell.verdict != "same":
        sign = "+" if cell.delta >= 0 else ""
        pct = f", {sign}{cell.delta_pct:.1f}%" if cell.delta_pct is not None else ""
        lines.append(f"({sign}{fmt_number(cell.delta)}{pct})")
    if cell.samples > 1 and cell.low is not None and cell.high is not None:
        lines.append(f"[n={cell.samples} {fmt_number(cell.low)}..{fmt_number(cell.high)}]")
        if cell.value:  # the band as a share of the value: "n = 3, ±0.6 %" reads at a glance
            lines.append(f"(±{(cell.high - cell.low) / 2 / abs(cell.value) * 100:.1f}%)")
    if cell.noise and cell.verdict != "baseline":  # a conditions note runs long: wrapped, so the column stays narrow
        lines.extend(textwrap.wrap(f"({cell.noise})", NOTE_WIDTH, break_long_words=False, break_on_hyphens=False))
    return lines


NOTE_WIDTH = 26
"""The widest line of a cell's noise note: "(1 sample, noise unknown)" whole, a conditions note wrapped."""


def _compare_grid(comparison: Comparison) -> Grid:
    """A column a run (the baseline first), a metric on one line with its spread and noise
    notes on the lines below; on a narrow terminal the last runs are hidden first, named in
    the footer, and long metric names are cut."""
    columns = [Column("metric"), Column("unit", whole=True)]
    series = any(run.against is None for run in comparison.runs[1:])
    for index, run in enumerate(comparison.runs):
        repeats = f" x{len(run.repeats)}" if len(run.repeats) > 1 else ""
        head = f"{run.run_id[:SHORT_ID]}{repeats}\n{run.recipe} [{run.status}]\n{run.hardware_class}"
        config = config_label(run.config, comparison.axes)
        if config:  # what changed between the runs: each column's configuration, under its name
            head += "\n" + "\n".join(textwrap.wrap(config, NOTE_WIDTH, break_long_words=False))
        if index and series:  # several series: what each column is compared with
            head += f"\nvs {run.against[:SHORT_ID]}" if run.against else "\nown series"
        columns.append(Column(head, right=True, whole=True, drop=index if index > 1 else 0))
    rows: list[tuple[str, ...]] = []
    for row in comparison.metrics:
        units = sorted({c.unit for c in row.cells if c.unit})
        arrow = {None: "", True: " (higher better)", False: " (lower better)"}[row.higher_is_better]
        cells = [_cell_lines(c) for c in row.cells]
        for depth in range(max(map(len, cells), default=1)):
            lead = (row.name + arrow, " / ".join(units)) if depth == 0 else ("", "")
            rows.append((*lead, *(lines[depth] if depth < len(lines) else "" for lines in cells)))
    return Grid(tuple(columns), tuple(rows))
