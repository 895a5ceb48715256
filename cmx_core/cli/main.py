"""The ``cmx`` command: argument parsing and printing only; the logic is in the Python API.

Exit codes: 0 success, 1 a run failed, 2 bad usage or bad input, 130 interrupted. Every
error is one line on stderr; ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from cmx_core import __version__
from cmx_core.errors import CmxError, UsageError


CORE_COMMANDS = {"run", "plan", "explain", "list", "show", "cache", "results", "plugins", "registry"}
"""Commands that need no plugin command parsers (plugins still load when a command runs)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line UsageErrors (exit 2, no usage dump)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts."""
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    common.add_argument("--recipes", action="append", default=[], metavar="DIR",
                        help="an extra recipe directory (highest precedence; repeatable)")
    common.add_argument("--strict-plugins", action="store_true", help="fail if any plugin fails to load")
    common.add_argument("-v", "--verbose", action="store_true", help="more progress detail on stderr")
    return common


def build_parser(with_plugins: bool = True) -> Parser:
    parser = Parser(prog="cmx", description="cmx: a recipe engine for reproducible ML benchmarking")
    parser.add_argument("--version", action="version", version=f"cmx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    common = common_options()
    from cmx_core.cli import cache_cmd, core_cmds

    core_cmds.add_parsers(sub, common)
    cache_cmd.add_parser(sub, common)
    for module in _optional_modules():
        _add_module_parser(module, sub, common)
    if with_plugins:
        _add_plugin_commands(sub, common)
    return parser


def _optional_modules() -> list[Any]:
    """CLI modules of other layers (results, plugins, registry), each ``add_parser(sub)``."""
    import importlib

    modules = []
    for name in ("results_cmd", "plugins_cmd", "registry_cmd"):
        try:
            modules.append(importlib.import_module(f"cmx_core.cli.{name}"))
        except ImportError:
            continue
    return modules


def _add_module_parser(module: Any, sub: Any, common: argparse.ArgumentParser) -> None:
    """Call ``module.add_parser(sub[, common])`` (the common options when it accepts them)."""
    import inspect

    if len(inspect.signature(module.add_parser).parameters) > 1:
        module.add_parser(sub, common)
    else:
        module.add_parser(sub)


def _add_plugin_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    from cmx_core.plugins import get_registry

    for command in get_registry().commands.values():
        if command.name in sub.choices:
            continue
        parser = sub.add_parser(command.name, help=command.summary, description=command.summary)
        command.configure(parser)
        if not any("--json" in a.option_strings for a in parser._actions):
            parser.add_argument("--json", action="store_true", help="print exactly one JSON document")
        parser.set_defaults(handler=command.run)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(args_list)
    except CmxError as exc:
        _print_error(exc, args_list)
        return exc.exit_code
    except KeyboardInterrupt:
        print("cmx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


def _dispatch(args_list: list[str]) -> int:
    if "--strict-plugins" in args_list:
        import os

        os.environ["CMX_STRICT_PLUGINS"] = "1"
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(with_plugins=command not in CORE_COMMANDS)
    args, extra = parser.parse_known_args(args_list)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if extra and not getattr(args, "accepts_inputs", False):
        raise UsageError(f"cmx {args.command}: unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    handler = getattr(args, "handler", None)
    if handler is None:
        raise UsageError(f"cmx {args.command}: missing subcommand (see 'cmx {args.command} --help')")
    return int(handler(args) or 0)


def _print_error(exc: CmxError, args_list: list[str]) -> None:
    message = " ".join(str(exc).split("\n")[0].split())
    if "--json" in args_list:
        import json

        print(json.dumps({"error": message, "exit_code": exc.exit_code}))
    print(f"cmx: error: {message}", file=sys.stderr)
    result_path = getattr(exc, "result_path", None)
    if result_path is not None:
        print(f"cmx: the failed run was recorded in {result_path}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
