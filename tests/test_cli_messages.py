"""The small messages of #33 item 5: a missing requirement names the next step, the error
prefix is never doubled, a misspelt option is an unknown option with did-you-mean, a choice
value gets did-you-mean, and ``cmx run script`` is an alias of ``cmx run recipe``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.cli.main import error_line

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"

DEVICE = """
    name: dev
    tags: [dev]
    summary: a device group whose gpu member needs what no machine has
    inputs:
      mode: {type: choice, choices: [Server, Offline, SingleStream], default: Offline}
    variations:
      cpu: {group: device, default: true}
      h100: {group: device, requires: {os.name: plan9}}
    steps: [{uses: shell, with: {cmd: [echo, hi]}}]
"""


def _one_error(result: Any) -> str:
    assert result.code == 2 and "Traceback" not in result.err, result.err
    errors = [line for line in result.err_lines if line.startswith("cmx: error:")]
    assert len(errors) == 1, result.err
    return errors[0]


def test_a_missing_requirement_names_the_next_step(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("dev", DEVICE)
    here = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=dev,h100"))
    assert "requires os.name plan9; this machine has: linux" in here
    assert "to plan for such a machine, give its facts: cmx plan ... --facts FILE" in here
    assert "or drop 'h100' from the tags to run here with its default 'cpu'" in here
    facts = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=dev,h100", "--facts", FACTS / "l4-1x.json"))
    assert "(facts from" in facts and "--facts FILE" not in facts
    assert "or drop 'h100' from the tags to plan with its default 'cpu'" in facts
    assert cli("plan", "--recipes", recipes.dir, "--tags=dev").code == 0  # the advice works


@pytest.mark.parametrize(("message", "line"), [
    ("cmx plan: the following arguments are required: --tags",
     "cmx: error: plan: the following arguments are required: --tags"),
    ("cmx results compare: run a differs", "cmx: error: results compare: run a differs"),
    ("cmx: error: boom", "cmx: error: boom"),
    ("cmx sweep: point 1 (size=oops): cmx: error: bad size", "cmx: error: sweep: point 1 (size=oops): bad size"),
    ("local executor: x: error: y", "cmx: error: local executor: x: error: y"),
])
def test_the_error_prefix_is_never_doubled(message: str, line: str) -> None:
    assert error_line(message) == line


def test_no_command_error_doubles_the_prefix(cli: Callable[..., Any]) -> None:
    for args in (("plan",), ("run", "--jobs=x", "--tags=demo,sort"), ("results", "compare", "a")):
        line = _one_error(cli(*args))
        assert not line.startswith(("cmx: error: cmx", "cmx: error: error")), line


def test_a_misspelt_option_is_an_unknown_option(cli: Callable[..., Any]) -> None:
    valued = _one_error(cli("run", "--tags=demo,sort", "--jbos", "2"))
    assert "unknown option '--jbos'; did you mean '--jobs'" in valued and "--input" not in valued
    assert "its inputs: repeats, size" in valued
    flag = _one_error(cli("run", "--tags=demo,sort", "--no-cahce"))
    assert flag.startswith("cmx: error: unknown option '--no-cahce'; did you mean '--no-cache'?")
    an_input = _one_error(cli("plan", "--tags=demo,sort", "--sise=3"))
    assert "unknown option '--sise': unknown input 'sise' for recipe demo-sort; did you mean 'size'?" in an_input


def test_a_choice_value_gets_did_you_mean(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("dev", DEVICE)
    typo = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=dev", "--mode=Sever"))
    assert typo.startswith("cmx: error: --mode=Sever: input 'mode' = 'Sever' is not one of: Server, Offline")
    assert typo.endswith("; did you mean 'Server'?")
    case = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=dev", "--mode=offline"))
    assert case.endswith("; did you mean 'Offline'?")
    far = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=dev", "--mode=zzz"))
    assert "did you mean" not in far


def test_run_script_is_an_alias_of_run_recipe(cli: Callable[..., Any]) -> None:
    by_tags = cli("run", "script", "--tags=demo,sort", "--size=3", "--repeats=1", "--json")
    assert by_tags.code == 0, by_tags.err
    assert json.loads(by_tags.out)["benchmark"]["task"] == "demo-sort"
    by_words = cli("run", "script", "demo", "sort", "--size=3", "--repeats=1", "--json")
    assert by_words.code == 0 and json.loads(by_words.out)["run_id"], by_words.err
    assert cli("plan", "script", "--tags=demo,sort").code == 0
    assert cli("explain", "script", "--tags=demo,sort").code == 0
    stray = _one_error(cli("run", "script", "extra", "--tags=demo,sort"))
    assert "unrecognized argument 'extra' next to --tags" in stray
