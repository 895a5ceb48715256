"""Top-level help lists plugin commands from a cache that is dropped when a plugin module
or the installed distributions change."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cmx_core.plugins import command_index


def test_help_lists_core_and_plugin_commands(cli) -> None:
    first = cli("--help")
    assert first.code == 0
    for name in ("run", "plan", "explain", "cache", "results", "plugins", "registry"):
        assert f"    {name}" in first.out
    cached = command_index.read_summaries()
    assert cached is not None  # written by the first call
    second = cli("--help")
    assert second.out == first.out
    for name, _ in cached:  # a GROUP.NOUN command is listed under its group (cmx import cm)
        assert f"    {name.split('.')[0]}" in second.out


def test_summaries_are_stale_when_a_plugin_module_changes(tmp_path: Path) -> None:
    module = tmp_path / "plugin.py"
    module.write_text("# a plugin\n")
    command_index.write_summaries([("hello", "say hello")], [str(module)])
    assert command_index.read_summaries() == [("hello", "say hello")]
    later = time.time_ns() + 5_000_000_000
    os.utime(module, ns=(later, later))
    assert command_index.read_summaries() is None


def test_summaries_are_stale_when_plugin_selection_changes(monkeypatch) -> None:
    command_index.write_summaries([("hello", "say hello")], [])
    assert command_index.read_summaries() is not None
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    assert command_index.read_summaries() is None


def test_unknown_command_lists_the_choices(cli) -> None:
    cli("--help")
    result = cli("frobnicate")
    assert result.code == 2 and "invalid choice: 'frobnicate'" in result.err and "'run'" in result.err


def _argparse_help() -> str:
    from cmx_core.cli.parser import build_parser

    return build_parser(None).format_help()


def test_rendered_help_is_reused_only_for_the_same_width(cli, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    first = cli("--help")
    assert command_index.read_help(60) == first.out == _argparse_help()
    assert cli("-h").out == first.out
    assert command_index.read_help(100) is None
    monkeypatch.setenv("COLUMNS", "100")
    wide = cli("--help")
    assert wide.out == _argparse_help() != first.out
    assert command_index.read_help(100) == wide.out


def test_rendered_help_is_stale_when_the_commands_or_the_parser_change(cli, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    cli("--help")
    assert command_index.read_help(80) is not None
    command_index.write_summaries([("hello", "say hello")], [])
    assert command_index.read_help(80) is None
    cli("--help")
    assert command_index.read_help(80) is not None
    parser_file = command_index._parser_file()
    monkeypatch.setattr(command_index, "_parser_file", lambda: parser_file + ".moved")
    assert command_index.read_help(80) is None


def test_terminal_width_matches_shutil(monkeypatch) -> None:
    import shutil

    for columns in ("", "0", "37", "x"):
        monkeypatch.setenv("COLUMNS", columns)
        assert command_index.terminal_width() == shutil.get_terminal_size().columns
