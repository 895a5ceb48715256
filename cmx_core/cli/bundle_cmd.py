"""``cmx bundle create|verify|import|replay``: argument parsing and printing over
:mod:`cmx_core.bundle`. Every subcommand verifies first: a bundle that fails is exit 2 with
the member named, and is never imported or replayed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cmx_core import paths
from cmx_core.bundle.importer import import_bundle
from cmx_core.bundle.members import limits
from cmx_core.bundle.pack import BundleOptions, create_bundle
from cmx_core.bundle.replay import ReplayOptions, replay_bundle
from cmx_core.bundle.trust import policy
from cmx_core.bundle.verdict import DEFAULT_TOLERANCE
from cmx_core.bundle.verify import verify_bundle
from cmx_core.cli.core_cmds import parse_executor_options
from cmx_core.errors import UsageError
from cmx_core.results.grid import Column, Grid, fit, fit_text, print_fitted, width_for
from cmx_core.results.noise import RULE
from cmx_core.results.numbers import fmt_number
from cmx_core.results.secrets import DEFAULT_ENV_ALLOW
from cmx_core.results.store import ResultStore
from cmx_core.run.drift import DRIFT_CLASSES


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    bundle = sub.add_parser("bundle", parents=[common], help="pack, verify, import and replay runs for someone else")
    actions = bundle.add_subparsers(dest="action", metavar="ACTION", parser_class=type(bundle), required=True)
    create = actions.add_parser("create", parents=[common], help="pack run directories into one verified .tar.gz")
    create.add_argument("runs", metavar="RUN", nargs="+", help="run ids, unique prefixes or run directories")
    create.add_argument("-o", "--output", required=True, metavar="FILE.tar.gz", help="the bundle to write")
    create.add_argument("--sign", action="store_true", help="sign the manifest with an ssh key (ssh-keygen -Y)")
    create.add_argument("--key", metavar="PATH", default=os.environ.get("CMX_SIGNING_KEY"),
                        help="the private ssh key for --sign (default: $CMX_SIGNING_KEY)")
    create.add_argument("--env-allow", action="append", default=[], metavar="PATTERN",
                        help="also keep environment variables matching this glob (repeatable)")
    create.set_defaults(handler=cmd_create)
    for name, summary, handler in (("verify", "check every member against the manifest", cmd_verify),
                                   ("import", "verify, then add the runs to the results store", cmd_import),
                                   ("replay", "verify, re-run each run from its lock here, compare", cmd_replay)):
        action = actions.add_parser(name, parents=[common], help=summary)
        action.add_argument("bundle", metavar="FILE", help="the bundle (.tar.gz)")
        action.add_argument("--allowed-signers", metavar="FILE", help="ssh allowed_signers: the signature must verify")
        action.add_argument("--identity", metavar="ID", help="with --allowed-signers: the signer's principal")
        action.add_argument("--require-signature", action="store_true",
                            help="refuse a bundle whose signature does not verify against the allowed signers "
                                 "(as CMX_REQUIRE_SIGNATURE=1; see docs/bundles.md#trust)")
        action.add_argument("--max-bytes", type=int, default=None, metavar="N",
                            help="refuse a bundle whose members hold more bytes (default 16 GiB; "
                                 "CMX_BUNDLE_MAX_BYTES)")
        action.add_argument("--max-members", type=int, default=None, metavar="N",
                            help="refuse a bundle with more members (default 100000; CMX_BUNDLE_MAX_MEMBERS)")
        action.set_defaults(handler=handler)
        if name == "replay":
            _replay_options(action, sorted(DRIFT_CLASSES))


def _replay_options(parser: argparse.ArgumentParser, classes: list[str]) -> None:
    parser.add_argument("--executor", default=None, help="where to run (default as for cmx run)")
    parser.add_argument("--executor-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the executor (repeatable)")
    parser.add_argument("--allow-drift", action="append", default=[], metavar="CLASS", choices=classes,
                        help=f"let this class of drift through ({', '.join(classes)}; see docs/bundles.md)")
    parser.add_argument("--facts", metavar="FILE", help="use a saved facts file instead of probing this machine")
    parser.add_argument("--tolerance", type=float, default=None, metavar="FRACTION",
                        help="relative half-width of the reproduced band (default 0.05)")
    parser.add_argument("--repeats", type=int, default=None, metavar="N",
                        help="replays of each lock (default: as many as the original's repeats, at least 3)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a replay differs from its original")


def _verified(args: argparse.Namespace) -> Any:
    trust = policy(args.allowed_signers, args.identity, args.require_signature)
    return verify_bundle(Path(args.bundle), trust, limits(args.max_bytes, args.max_members))


def _warn_unchecked(verified: Any) -> None:
    """Say plainly, on stderr after the command's output, that no signature was checked."""
    if verified.unchecked_note:
        print(f"warning: {verified.unchecked_note}", file=sys.stderr)


def _print(args: argparse.Namespace, data: Any, lines: list[str]) -> None:
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        for line in lines:
            print_fitted(line, args.wide)


def cmd_create(args: argparse.Namespace) -> int:
    if args.sign and not args.key:
        raise UsageError("--sign needs a key: --key PATH (a private ssh key) or CMX_SIGNING_KEY")
    if args.key and not args.sign:
        raise UsageError("--key is for --sign; add --sign or drop --key")
    options = BundleOptions(env=dict(os.environ), allow=(*DEFAULT_ENV_ALLOW, *args.env_allow),
                            key=Path(args.key) if args.sign else None)
    created = create_bundle([_run_dir(r) for r in args.runs], Path(args.output), options)
    manifest = created.manifest
    notes = (", signed" if manifest.signed else "") + (
        f", {len(manifest.redacted)} redacted" if manifest.redacted else "")
    _print(args, created.to_json(), [f"wrote {created.path}: {len(manifest.runs)} run(s), "
                                     f"{len(manifest.files) + 1} member(s){notes}"])
    return 0


def _run_dir(run: str) -> Path:
    """A run directory, or the directory of a stored run id (prefix)."""
    if Path(run).is_dir():
        return Path(run)

    return ResultStore(paths.results_db()).resolve(run)[1].parent


def cmd_verify(args: argparse.Namespace) -> int:
    verified = _verified(args)
    _print(args, verified.to_json(), [f"{verified.path}: verified, {len(verified.members)} member(s), "
                                      f"{len(verified.manifest.runs)} run(s), {verified.signature}"])
    _warn_unchecked(verified)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    verified = _verified(args)
    done = import_bundle(verified, ResultStore(paths.results_db()), paths.runs_dir())
    lines = [f"imported {run_id} -> {run_dir}" for run_id, run_dir in done.imported]
    lines += [f"already in the store: {run_id}" for run_id in done.already]
    _print(args, {**done.to_json(), "signature": verified.signature,
                  "signature_checked": verified.signature_checked}, lines)
    _warn_unchecked(verified)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 <= tolerance < 1:
        raise UsageError(f"--tolerance {tolerance}: give a fraction from 0 to 1, e.g. 0.05")
    options = ReplayOptions(executor=args.executor, allow_drift=tuple(args.allow_drift), recipes=tuple(args.recipes),
                            facts_file=args.facts, tolerance=tolerance,
                            options=parse_executor_options(args.executor_opt), repeats=args.repeats)
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats {args.repeats}: give 1 or more replays of each lock")
    verified = _verified(args)
    report = replay_bundle(verified, options)
    if args.json:
        _print(args, {**report.to_json(), "signature": verified.signature,
                      "signature_checked": verified.signature_checked}, [])
    else:
        _print_replay(report, width_for(args.wide))
    _warn_unchecked(verified)
    return 1 if args.check and report.verdict == "differs" else 0


def _print_replay(report: Any, width: int | None) -> None:
    """The rule, then each judgement's verdict and its metrics as a table fitted to ``width``."""
    print(fit_text(f"rule: {RULE}", width))
    columns = (Column("metric"), Column("unit", whole=True, drop=1),
               Column("original", right=True, whole=True), Column("replay", right=True, whole=True),
               Column("band", whole=True, drop=2),
               Column("verdict", whole=True), Column("reason", drop=3))
    for judgement in report.judgements:
        print(fit_text(f"{judgement.verdict}: {judgement.reason}", width))
        if judgement.conditions is not None and judgement.conditions.state != "not recorded":
            print(fit_text(judgement.conditions.reason, width))
        print(fit_text(f"original {', '.join(judgement.original_runs)} vs replay {', '.join(judgement.replay_runs)}",
                       width))
        rows = tuple((m.name, m.unit or "", _side(m.original, fmt_number), _side(m.replay, fmt_number),
                      f"{fmt_number(m.band[0])}..{fmt_number(m.band[1])}" if m.band else "-", m.verdict, m.reason)
                     for m in judgement.metrics)
        sys.stdout.write(fit(Grid(columns, rows), width).text())


def _side(samples: Any, fmt: Any) -> str:
    if samples is None:
        return "-"
    text = str(fmt(samples.median))
    return text if samples.n == 1 else f"{text} [{fmt(samples.low)}..{fmt(samples.high)}, n={samples.n}]"
