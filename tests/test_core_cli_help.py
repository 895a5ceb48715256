"""Top-level help lists plugin commands from a cache that is dropped when a plugin module
or the installed distributions change."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cmx_core import command_index


def test_help_lists_core_and_plugin_commands(cli) -> None:
    first = cli("--help")
    assert first.code == 0
    for name in ("run", "plan", "explain", "cache", "results", "plugins", "registry"):
        assert f"    {name}" in first.out
    cached = command_index.read_summaries()
    assert cached is not None  # written by the first call
    second = cli("--help")
    assert second.out == first.out
    for name, _ in cached:
        assert name in second.out


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
