"""Every command's human output at 80 columns, stdout piped (#50 item 1): no line over 80
(but a whole word or command to copy), no word split across lines, a cut cell announced by
the footer, and ``--wide`` working. The run summary is covered by a real MLPerf LoadGen run
(its not-submittable reasons) and a planted recipe's run.

The commands are read from cmx's own parser, so a command added later without a line here
fails :func:`test_every_command_is_covered`. A plugin's commands are checked by that
plugin's tests with the same checker (:mod:`cmx_core.testing.fits`); they are named here."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.cli.parser import build_parser
from cmx_core.testing.fits import assert_fits, fit_problems

WIDTH = 80
ROOT = Path(__file__).resolve().parents[1]
RECIPE = """
name: planted-throughput
version: "1.0"
tags: [planted, throughput]
summary: a throughput and a latency read from the recipe's inputs, a stand-in for a measurement whose summary is long
description: |
  A recipe whose description runs long enough to wrap on an 80-column terminal, written as
  a paragraph over several lines of the recipe file.
inputs:
  rate: {type: number, default: 1, description: "the throughput to report, as printed by the planted step"}
  label: {type: string, default: "a-rather-long-input-value-that-would-widen-the-inputs-column-a-lot"}
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["printf", "RATE=%s\\nLATENCY=0.000123456\\n", "{{ inputs.rate }}"]
      metrics:
        tokens_per_second: {kv: RATE, unit: tokens/s, higher_is_better: true}
        latency_s: {kv: LATENCY, unit: s, higher_is_better: false}
"""
MACHINE_READ = {
    "completion": "a shell completion script, read by the shell",
    "monitor prometheus-config": "a Prometheus configuration file (YAML), read by Prometheus",
    "monitor grafana-dashboard": "a Grafana dashboard (JSON), read by Grafana",
    "cache show": "the entry's metadata document (JSON, as with --json), read by jq and by people",
}
"""Commands whose stdout is a file for a program, not lines for a person."""
IN_PLUGIN_TESTS = {
    "detect": "plugins/detect/tests/test_detect_fits.py",
    "cm": "plugins/cm/tests/test_cm_fits.py",
    "import cm": "plugins/cm/tests/test_cm_fits.py",
    "ale-bench": "plugins/alebench/tests/test_alebench_fits.py",
    "import ale-bench": "plugins/alebench/tests/test_alebench_fits.py",
}
"""A plugin's commands, checked with :func:`assert_fits` by the plugin's own tests (where
its fixtures are: a CM collection, an ALE-Bench problem)."""
NOT_RUN = {
    "plugins wheelhouse": "builds a wheel of cmx-core and of every plugin (minutes); its one status line goes "
                          "through the same fit_text as plugins install's and its install command is printed "
                          "whole for copying (tests/test_plugins_wheelhouse.py)",
}
"""Commands checked through the output code they share, with why they are not run here."""


def all_commands() -> list[str]:
    """Every command and subcommand the parser knows, core and plugin (``cache list``...)."""
    top = build_parser(None)
    names = [name for action in top._actions if isinstance(action, argparse._SubParsersAction)
             for name in action.choices]
    found: list[str] = []
    for name in names:
        parser = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
        found += _leaves(parser.choices[name], [name])
    return found


def _leaves(parser: argparse.ArgumentParser, prefix: list[str]) -> list[str]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs or prefix == ["cm"]:  # cmx cm VERB NOUN mirrors CM's own words: one command
        return [" ".join(prefix)]
    return [leaf for action in subs for name, sub in action.choices.items() for leaf in _leaves(sub, [*prefix, name])]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   capture_output=True, text=True, check=True, timeout=60)


def _recipe_repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "planted.yaml").write_text(RECIPE.replace("planted-throughput", "repo-planted")
                                       .replace("[planted, throughput]", "[repo, planted]"))
    _git(path, "add", "planted.yaml")
    _git(path, "commit", "-q", "-m", "a recipe")
    return path


class Checked:
    """Runs each command narrow (``COLUMNS=80``) and ``--wide``, keeping what it covered."""

    def __init__(self, cli: Callable[..., Any]) -> None:
        self.cli = cli
        self.covered: set[str] = set()
        self.problems: list[str] = []

    def __call__(self, command: str, *args: Any, same_twice: bool = True) -> str:
        """Check ``cmx COMMAND ARGS``. ``same_twice``: a second run prints the same words, so
        the ``--wide`` run is the reference for split words; otherwise (a new run, a new
        file) only the width and the footer are checked, and ``--wide`` must succeed."""
        argv = [*command.split(), *map(str, args)]
        narrow = self.cli(*argv)
        said = _said(narrow)
        assert narrow.code == 0 and said.strip(), f"cmx {' '.join(argv)}: {narrow.code} {narrow.err}"
        wide = self.cli(*argv, "--wide") if same_twice else None
        if wide is not None:
            assert wide.code == 0, f"cmx {' '.join(argv)} --wide: {wide.err}"
        found = fit_problems(said, WIDTH, _said(wide) if wide else None)
        self.problems += [f"cmx {' '.join(argv)}: {problem}" for problem in found]
        self.covered.add(command)
        return said


def _said(result: Any) -> str:
    """What a command says to its user: stdout, or stderr when stdout is empty (a command that
    writes a file says so on stderr, as ``results report`` does)."""
    return str(result.out if result.out.strip() else result.err)


@pytest.fixture
def checked(cli: Callable[..., Any], recipes: Any, monkeypatch: pytest.MonkeyPatch) -> Checked:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    recipes("planted", RECIPE)
    return Checked(cli)


def test_every_command_is_covered() -> None:
    named = {*MACHINE_READ, *IN_PLUGIN_TESTS, *NOT_RUN, *CORE_COMMANDS}
    missing = sorted(set(all_commands()) - named)
    assert not missing, f"commands whose human output no test fits to 80 columns: {missing}"
    for command, path in IN_PLUGIN_TESTS.items():
        text = (ROOT / path).read_text()
        assert "assert_fits" in text and f'"{command.split()[-1]}"' in text, f"{path} does not check cmx {command}"


CORE_COMMANDS = {"run", "plan", "sweep", "explain", "list", "show", "cache list", "cache rm", "cache prune",
                 "cache verify", "results list", "results show", "results compare", "results report",
                 "results plot", "results export", "results reindex", "results predict", "results suggest",
                 "plugins list", "plugins search", "plugins info", "plugins install", "plugins uninstall",
                 "plugins new", "registry check", "repo add", "repo list", "repo update", "repo rm",
                 "bundle create", "bundle verify", "bundle import", "bundle replay", "system check"}
"""The core commands :func:`test_every_core_command_fits_80_columns` runs."""


def test_every_core_command_fits_80_columns(checked: Checked, recipes: Any, tmp_path: Path) -> None:
    where = ("--recipes", recipes.dir)
    planted = "--tags=planted,throughput"
    runs = []
    for rate in (1523751.73, 998877.5, 31415926.25):
        done = checked.cli("run", "recipe", planted, *where, f"--rate={rate}", "--json")
        assert done.code == 0, done.err
        runs.append(json.loads(done.out)["run_id"][:8])
    summary = checked("run", "recipe", planted, *where, "--rate=2718281.5", same_twice=False)
    assert "2,718,281.5 tokens/s" in summary
    mlperf = checked("run", "recipe", "--tags=mlperf,classifier", "--duration_s=0.2", same_twice=False)
    assert "not submittable" in mlperf  # the summary's reasons, each wrapped at its spaces
    checked("plan", "recipe", planted, *where)
    checked("explain", "recipe", planted, *where)
    swept = checked.cli("sweep", planted, *where, "--matrix", "rate=1,2", "--json")
    assert swept.code == 0, swept.err
    checked("sweep", planted, *where, "--matrix", "rate=3,4", same_twice=False)
    checked("list", "recipes", *where)
    checked("show", "recipe", "planted-throughput", *where)
    checked("show", "recipe", "mlperf-inference-resnet50")

    assert checked.cli("run", "recipe", "--tags=demo,sort", "--size=1000", "--repeats=1", "--json").code == 0
    key = json.loads(checked.cli("cache", "list", "--json").out)[0]["key"]
    checked("cache list")
    shown = checked.cli("cache", "show", key)
    assert shown.code == 0 and json.loads(shown.out)["key"] == key
    checked("cache verify")
    checked("cache prune", "--older-than", "3650d", "--images", "--dry-run")

    checked("results list")
    checked("results show", runs[0])
    checked("results compare", *runs)
    checked("results compare", "--sweep", json.loads(swept.out)["sweep_id"])
    checked("results report", runs[0], "-o", tmp_path / "report.html", same_twice=False)
    checked("results plot", "--recipe", "planted-throughput", "-o", tmp_path / "plot.png", same_twice=False)
    checked("results export", "--format", "csv", tmp_path / "export.csv", runs[0], same_twice=False)
    checked("results reindex")
    checked("results predict", "--recipe", "planted-throughput", "--at", "rate=5", "--at", "rate=123456789")
    checked("results suggest", "--recipe", "planted-throughput")

    checked("plugins list")
    checked("plugins search", "a")
    checked("plugins info", "cmx-docker")
    checked("plugins install", "--dry-run", "--no-editable", ROOT / "plugins" / "detect")
    checked("plugins uninstall", "--dry-run", "cmx-detect")
    checked("plugins new", "a-plugin-with-a-rather-long-name-for-its-folder", "--dir", tmp_path / "new",
            same_twice=False)
    checked("registry check")
    checked("system check")

    repo = _recipe_repo(tmp_path / "a-recipe-repository-whose-path-runs-long")
    checked("repo add", repo, same_twice=False)
    checked("repo list")
    checked("repo update")
    checked("repo rm", repo.name, same_twice=False)

    bundle = tmp_path / "planted.tar.gz"
    checked("bundle create", runs[0], "-o", bundle, same_twice=False)
    checked("bundle verify", bundle)
    checked("bundle import", bundle, same_twice=False)
    checked("bundle replay", bundle, "--repeats", "1", same_twice=False)
    checked("cache rm", key, same_twice=False)

    assert not checked.problems, "\n".join(checked.problems[:20])
    assert checked.covered == CORE_COMMANDS, sorted(CORE_COMMANDS ^ checked.covered)


def test_the_checker_finds_a_long_line_a_split_word_and_an_unannounced_cut() -> None:
    assert fit_problems("x" * 81 + " y", 80)  # two words over 80: neither a path nor a command
    assert not fit_problems("result: /" + "a" * 100, 80)  # a labelled path, whole for copying
    assert fit_problems("a wrap that cut a wo\nrd", 80, wide="a wrap that cut a word")
    assert fit_problems("name  a cell that was c…", 80)  # cut, but no footer says --wide
    assert_fits("name  a cell that was c…\ncells ending in … are cut; --wide shows them", 80,
                wide="name  a cell that was cut whole")
