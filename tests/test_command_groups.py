"""Plugin commands named GROUP.NOUN share one word of the command line: two plugins each add
a noun to ``cmx greet``, as cmx-cm and cmx-alebench do to ``cmx import``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.api import Command, hookimpl
from cmx_core.cli.parser import top_level
from cmx_core.plugins import loader as plugins


def _plugin(noun: str) -> Any:
    def configure(parser: Any) -> None:
        parser.add_argument("who")

    def run(args: Any) -> int:
        print(json.dumps({"noun": noun, "who": args.who}) if args.json else f"{noun} {args.who}")
        return 0

    class Plugin:
        @hookimpl
        def cmx_register_commands(self, register: Any) -> None:
            register(Command(name=f"greet.{noun}", summary=f"greet in {noun}", configure=configure, run=run))

    return Plugin()


@pytest.fixture
def two_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = plugins.load_registry(extra=[("greet-en", _plugin("en")), ("greet-fr", _plugin("fr"))])
    monkeypatch.setattr(plugins, "_REGISTRY", registry)


@pytest.mark.usefixtures("two_plugins")
def test_each_plugin_adds_its_noun(cli: Callable[..., Any]) -> None:
    en = cli("greet", "en", "ada", "--json")
    assert en.code == 0 and json.loads(en.out) == {"noun": "en", "who": "ada"}, en.err
    fr = cli("greet", "fr", "bob")
    assert fr.code == 0 and fr.out == "fr bob\n"
    missing = cli("greet")
    assert missing.code == 2 and missing.err_lines == ["cmx: error: greet: missing subcommand (see 'cmx greet --help')"]
    typo = cli("greet", "eng", "x")
    assert typo.code == 2 and "invalid choice: 'eng'" in typo.err and "did you mean 'en'?" in typo.err
    top = cli("--help")
    assert "en | fr (see 'cmx greet WHAT --help')" in top.out


def test_the_top_level_entry_of_a_group() -> None:
    assert top_level([("a.x", "does x"), ("b", "does b")]) == [("a", "does x"), ("b", "does b")]
    assert top_level([("a.y", "y"), ("a.x", "x")]) == [("a", "x | y (see 'cmx a WHAT --help')")]


def test_import_is_shared_by_cm_and_alebench(cli: Callable[..., Any]) -> None:
    commands = plugins.get_registry().commands
    if not {"import.cm", "import.ale-bench"} <= set(commands):
        pytest.fail("cmx-cm and cmx-alebench are installed with cmx (scripts/install.sh)")
    shown = cli("import", "--help")
    assert shown.code == 0 and "ale-bench" in shown.out and "cm" in shown.out
    assert cli("import", "ale-bench", "--help").code == 0 and cli("import", "cm", "--help").code == 0
    assert cli("ale-bench", "import", "--help").code == 0  # the older spelling stays
