"""The ``cmx`` argument parser: core commands built lazily, plugin commands from the cache."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re

from cmx_core import __version__
from cmx_core.errors import UsageError, did_you_mean
from cmx_core.plugins.command_index import read_summaries
from cmx_core.plugins.loader import get_registry, remember_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line UsageErrors (exit 2, no usage dump)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}{_choice_hint(message)} (see '{self.prog} --help')")


CM_WORDS = {
    "pull": "CM's and MLC's 'pull repo URL' is 'cmx repo add URL'",
    "find": "CM's and MLC's 'find script --tags=T' is 'cmx list recipes --tags=T', 'find cache' is 'cmx cache list'",
    "search": "CM's and MLC's 'search script --tags=T' is 'cmx list recipes --tags=T', "
              "'search cache' is 'cmx cache list'",
    "rm": "CM's and MLC's 'rm cache' is 'cmx cache rm', 'rm repo NAME' is 'cmx repo rm NAME'",
    "script": "CM's and MLC's scripts are cmx's recipes: 'show script NAME' is 'cmx show recipe NAME', "
              "'find script' is 'cmx list recipes'",
    "docker": "CM's and MLC's 'docker script --tags=T' is 'cmx run recipe --tags=T --executor docker'",
}
"""CM's and MLC's command words (``cm pull repo``, ``mlc find cache``...) that are not cmx's,
with the cmx command that does the same: the hint of an invalid choice that is one of them."""


def _choice_hint(message: str) -> str:
    """"Did you mean" for argparse's ``invalid choice: 'rn' (choose from 'run', ...)``, or
    the cmx command for one of CM's and MLC's words (:data:`CM_WORDS`)."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if found is None:
        return ""
    if found.group(1) in CM_WORDS:
        return f"; {CM_WORDS[found.group(1)]}"
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts."""
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    common.add_argument("--recipes", action="append", default=[], metavar="DIR",
                        help="an extra recipe directory (highest precedence; repeatable)")
    common.add_argument("--strict-plugins", action="store_true", help="fail if any plugin fails to load")
    common.add_argument("--strict", action="store_true",
                        help="fail on any broken recipe file or plugin (the default when CI is set)")
    common.add_argument("--disable-plugin", action="append", default=[], metavar="NAME",
                        help="do not load plugin NAME (entry-point name; repeatable; as CMX_DISABLE_PLUGINS)")
    common.add_argument("--wide", action="store_true",
                        help="tables at their natural width, every column shown (default: fit COLUMNS, 80 when piped)")
    common.add_argument("-v", "--verbose", action="store_true", help="more progress detail on stderr")
    common.add_argument("-q", "--quiet", "-s", dest="quiet", action="store_true",
                        help="no progress on stderr (-s as in CM/MLC); errors are still printed")
    return common


COMMAND_MODULES: dict[str, tuple[str, str, str]] = {
    "run": ("core_cmds", "add_run", "resolve and run a recipe"),
    "plan": ("core_cmds", "add_plan", "print the resolved plan without running it"),
    "sweep": ("sweep_cmd", "add_parser", "run a recipe over a matrix of inputs, one stored run per point"),
    "explain": ("core_cmds", "add_explain", "why each recipe, variation and cache decision"),
    "list": ("core_cmds", "add_list", "list recipes"),
    "show": ("core_cmds", "add_show", "show a recipe's documentation"),
    "cache": ("cache_cmd", "add_parser", "inspect and clean the cache"),
    "results": ("results_cmd", "add_parser", "list, show, compare, export and predict run results"),
    "plugins": ("plugins_cmd", "add_parser", "list, find, install and scaffold plugins"),
    "registry": ("registry_cmd", "add_parser", "check the plugin registry (registry.yaml)"),
    "repo": ("repo_cmd", "add_parser", "add, list, update and remove recipe repositories"),
    "bundle": ("bundle_cmd", "add_parser", "pack, verify, import and replay runs for someone else"),
    "completion": ("completion_cmd", "add_parser", "print a shell completion script (bash, zsh or fish)"),
    "monitor": ("monitor_cmd", "add_parser", "Prometheus and Grafana set-up for cmx runs"),
    "system": ("system_cmd", "add_parser", "check this machine for benchmarking (noise sources and their fixes)"),
}
"""Core commands: the module and function adding each one's parser (imported only for the
command being run) and the one-line summary shown by ``cmx --help``."""


def build_parser(command: str | None = None) -> Parser:
    """The parser; for a known core ``command`` only that command's subparser is built
    (building every parser costs more than the rest of a warm run), otherwise all of them,
    plugin commands included."""
    parser = Parser(prog="cmx", description="cmx: a recipe engine for reproducible ML benchmarking")
    parser.add_argument("--version", action="version", version=f"cmx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    common = common_options()
    if command in COMMAND_MODULES:
        _add_command(command, sub, common)
        return parser
    for name, (_, _, summary) in COMMAND_MODULES.items():
        sub.add_parser(name, help=summary)  # names and summaries are all top-level help needs

    cached = read_summaries()
    if cached is not None and command not in {group_of(name) for name, _ in cached}:
        for name, summary in top_level(cached):  # top-level help or an unknown command: no plugin import
            if name not in sub.choices:
                sub.add_parser(name, help=summary, description=summary)
        return parser
    _add_plugin_commands(sub, common, command)
    return parser


def group_of(name: str) -> str:
    """The top-level word of a plugin command: ``import`` for ``import.ale-bench``."""
    return name.split(".", 1)[0]


def top_level(commands: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(name, summary)`` of each top-level command; the members of a group (``import.cm``,
    ``import.ale-bench``) make one entry: a lone member's summary, else the members' names."""
    merged: dict[str, list[tuple[str, str]]] = {}
    for name, summary in commands:
        group, _, noun = name.partition(".")
        merged.setdefault(group, []).append((noun, summary))
    return [(group, _group_summary(group, members)) for group, members in merged.items()]


def _group_summary(group: str, members: list[tuple[str, str]]) -> str:
    if len(members) == 1:
        return members[0][1]
    return f"{' | '.join(sorted(noun for noun, _ in members))} (see 'cmx {group} WHAT --help')"


def _add_command(name: str, sub: Any, common: argparse.ArgumentParser) -> None:
    module_name, function_name, _ = COMMAND_MODULES[name]
    add = getattr(importlib.import_module(f"cmx_core.cli.{module_name}"), function_name)
    if len(inspect.signature(add).parameters) > 1:
        add(sub, common)
    else:
        add(sub)


def _add_plugin_commands(sub: Any, common: argparse.ArgumentParser, selected: str | None) -> None:
    """Plugin commands: the ``selected`` one fully configured, the others by name only."""
    registry = get_registry()
    remember_commands(registry)
    groups: dict[str, Any] = {}
    for command in registry.commands.values():
        if "." in command.name:
            _add_grouped(sub, groups, command, selected, registry)
            continue
        if command.name in sub.choices:
            continue
        parser = sub.add_parser(command.name, help=command.summary, description=command.summary)
        if command.name != selected:
            continue
        command.configure(parser)
        _output_options(parser)
        parser.set_defaults(handler=command.run, cmx_registry=registry)


def _add_grouped(sub: Any, groups: dict[str, Any], command: Any, selected: str | None, registry: Any) -> None:
    """A plugin command ``GROUP.NOUN`` is ``cmx GROUP NOUN ...``: several plugins share one
    word (``cmx import cm DIR`` from cmx-cm, ``cmx import ale-bench PATH...`` from
    cmx-alebench); only the ``selected`` group's members are configured."""
    group, _, noun = command.name.partition(".")
    if group not in groups:
        if group in sub.choices:
            return  # a core or plain plugin command owns that word
        members = [(c.name, c.summary) for c in registry.commands.values() if group_of(c.name) == group]
        summary = top_level(members)[0][1]
        parser = sub.add_parser(group, help=summary, description=summary)
        groups[group] = parser.add_subparsers(dest="noun", metavar="WHAT", parser_class=Parser)
    member = groups[group].add_parser(noun, help=command.summary, description=command.summary)
    if group != selected:
        return
    command.configure(member)
    _output_options(member)
    member.set_defaults(handler=command.run, cmx_registry=registry)


def _output_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--wide`` on a plugin command that did not add them itself."""
    if not any("--json" in a.option_strings for a in parser._actions):
        parser.add_argument("--json", action="store_true", help="print exactly one JSON document")
    if not any("--wide" in a.option_strings for a in parser._actions):
        parser.add_argument("--wide", action="store_true", help="tables at their natural width, every column")
