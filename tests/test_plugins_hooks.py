"""Every hook exercised through the real engine and CLI, by an in-process plugin.

The plugin below implements all cmx hooks and records what cmx did with them; it is
registered with ``load_registry(extra=...)`` next to cmx-core's built-ins only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cmx_core import api
from cmx_core.api import (
    Command,
    Detector,
    ExecutionRequest,
    Executor,
    Exporter,
    Launcher,
    NodeCommand,
    RankLayout,
    SandboxBackend,
    SandboxResult,
    SandboxSpec,
    StepContext,
    StepOutput,
    StepType,
    Suite,
    Verdict,
    hookimpl,
)
from cmx_core.cli.main import main
from cmx_core.plugins import loader as plugins

RECIPE = """\
name: hooktest-echo
tags: [hooktest, echo]
summary: echo a text through the hooktest.echo step
inputs:
  text: {type: string, default: hi}
steps:
  - uses: hooktest.echo
    with: {text: "{{ inputs.text }}"}
outputs:
  echoed: {}
"""


class Recorder:
    """A plugin implementing every hook, recording each call."""

    def __init__(self, recipes: Path) -> None:
        self.recipes = recipes
        self.events: list[tuple[Any, ...]] = []

    def _echo(self, ctx: StepContext) -> StepOutput:
        self.events.append(("step", ctx.params["text"]))
        self.events.append(("launchers", tuple(sorted(ctx.launchers))))
        return StepOutput(outputs={"echoed": ctx.params["text"]})

    def _execute(self, request: ExecutionRequest) -> Path:
        self.events.append(("executor", request.context.plan.root.recipe_name))
        local = plugins.get_registry().executors["local"]
        return local.run(request)

    def _export(self, documents: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
        dest.write_text(json.dumps([d["run_id"] for d in documents]), encoding="utf-8")

    def _command(self, args: Any) -> int:
        print(json.dumps({"times": args.times}) if args.json else "x" * args.times)
        return 0

    @hookimpl
    def cmx_register_steps(self, register: Callable[[StepType], None]) -> None:
        register(StepType(name="hooktest.echo", summary="echo", run=self._echo,
                          params={"text": "what to echo"}))

    @hookimpl
    def cmx_register_detectors(self, register: Callable[[Detector], None]) -> None:
        register(Detector(name="hooktest_fact", summary="a constant fact",
                          detect=lambda: {"answer": 42}))

    @hookimpl
    def cmx_register_executors(self, register: Callable[[Executor], None]) -> None:
        register(Executor(name="hooktest-exec", summary="local, recorded", run=self._execute))

    @hookimpl
    def cmx_register_commands(self, register: Callable[[Command], None]) -> None:
        register(Command(name="hooktest-cmd", summary="print x times",
                         configure=lambda p: p.add_argument("--times", type=int, default=1),
                         run=self._command))

    @hookimpl
    def cmx_register_exporters(self, register: Callable[[Exporter], None]) -> None:
        register(Exporter(name="hooktest-ids", summary="run ids as JSON", export=self._export))

    @hookimpl
    def cmx_register_suites(self, register: Callable[[Suite], None]) -> None:
        register(Suite(name="hooktest-suite", summary="a suite with a section", section="hooktest",
                       schema={"type": "object", "properties": {"n": {"type": "integer"}}}))

    @hookimpl
    def cmx_register_sandboxes(self, register: Callable[[SandboxBackend], None]) -> None:
        register(SandboxBackend(name="hooktest-box", summary="runs nothing, recorded", create=lambda: _NoSandbox()))

    @hookimpl
    def cmx_register_launchers(self, register: Callable[[Launcher], None]) -> None:
        register(Launcher(name="hooktest-launch", summary="echo the ranks", wrap=self._launch))

    def _launch(self, command: Any, layout: RankLayout) -> NodeCommand:
        return NodeCommand(("echo", str(layout.world_size), *command), {"RANKS": str(layout.world_size)}, "echo")

    @hookimpl
    def cmx_recipe_paths(self) -> list[Path]:
        return [self.recipes]

    @hookimpl
    def cmx_repo_recipes(self, tree: Path) -> list[Path] | None:
        """A repository holding ``hooktest.txt`` (a greeting): one translated recipe."""
        marker = tree / "hooktest.txt"
        if not marker.is_file():
            return None
        out = self.recipes.parent / "translated" / tree.name
        out.mkdir(parents=True, exist_ok=True)
        (out / "hooktest-greet.yaml").write_text(RECIPE.replace("hooktest-echo", "hooktest-greet").replace(
            "[hooktest, echo]", "[hooktest, greet]").replace("hi", marker.read_text().strip()), encoding="utf-8")
        self.events.append(("repo", tree.name))
        return [out]

    @hookimpl
    def cmx_node_started(self, node_id: str, recipe: str, cached: bool) -> None:
        self.events.append(("started", recipe, cached))

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Mapping[str, Any],
                          wall_s: float, cached: bool) -> None:
        self.events.append(("finished", recipe, dict(outputs), cached, wall_s >= 0))

    @hookimpl
    def cmx_node_failed(self, node_id: str, recipe: str, error: str, wall_s: float) -> None:
        self.events.append(("failed", recipe, error, wall_s >= 0))

    @hookimpl
    def cmx_result_written(self, path: Path, document: Mapping[str, Any]) -> None:
        self.events.append(("result", Path(path), document["run_id"]))

    @hookimpl
    def cmx_prune_resources(self, referenced: frozenset[str], dry_run: bool) -> list[str]:
        self.events.append(("prune", "kept" in referenced, dry_run))
        return [] if "kept" in referenced else ["hooktest resource"]


class _NoSandbox:
    name = "hooktest-box"

    def available(self) -> str | None:
        return None

    def run(self, spec: SandboxSpec) -> SandboxResult:
        return SandboxResult(verdict=Verdict.OK, exit_code=0, signal=None, wall_s=0.0, cpu_s=None,
                             peak_memory_bytes=None, stdout=b"", stderr=b"", truncated=False, reason="not run",
                             backend=self.name)


@pytest.fixture
def recorder(tmp_path: Path, cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "hooktest-echo.yaml").write_text(RECIPE, encoding="utf-8")
    plugin = Recorder(recipes)
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=[("hooktest", plugin)])
    assert registry.plugins["hooktest"].error is None, registry.plugins["hooktest"].error
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    yield plugin


def test_cmx_register_steps_and_cmx_recipe_paths_run_a_recipe(recorder: Recorder) -> None:
    result = api.run(tags="hooktest,echo", inputs={"text": "bonjour"})
    assert result.status == "completed"
    assert ("step", "bonjour") in recorder.events
    assert result.document["outputs"]["echoed"] == "bonjour"


def test_cmx_register_launchers_reach_the_step_through_its_context(recorder: Recorder) -> None:
    api.run(tags="hooktest,echo", inputs={"text": "launch"})
    assert ("launchers", ("env", "hooktest-launch", "mpirun", "none", "torchrun")) in recorder.events
    launcher = plugins.get_registry().launchers["hooktest-launch"]
    node = launcher.wrap(("python", "-c", "pass"), RankLayout(nodes=2, procs_per_node=4))
    assert node == NodeCommand(("echo", "8", "python", "-c", "pass"), {"RANKS": "8"}, "echo")
    assert launcher.plugin == "hooktest"


def test_cmx_node_started_and_cmx_node_finished_see_cache_hits(recorder: Recorder) -> None:
    api.run(tags="hooktest,echo", inputs={"text": "a"})
    api.run(tags="hooktest,echo", inputs={"text": "a"})
    nodes = [e for e in recorder.events if e[0] in ("started", "finished")]
    assert nodes == [
        ("started", "hooktest-echo", False),
        ("finished", "hooktest-echo", {"echoed": "a"}, False, True),
        ("started", "hooktest-echo", True),
        ("finished", "hooktest-echo", {"echoed": "a"}, True, True),
    ]
    assert [e for e in recorder.events if e[0] == "step"] == [("step", "a")]


def test_cmx_result_written_gets_the_indexed_document(recorder: Recorder) -> None:
    result = api.run(tags="hooktest,echo")
    assert ("result", result.result_path, result.run_id) in recorder.events


def test_cmx_prune_resources_gets_the_entries_strings_from_cache_prune_images(
        recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json

    from cmx_core.cli import cache_cmd

    args = argparse.Namespace(older_than=None, images=True, dry_run=True, json=True)
    cache_cmd.cmd_prune(args)
    assert json.loads(capsys.readouterr().out)["resources"] == ["hooktest resource"]
    assert ("prune", False, True) in recorder.events
    api.run(tags="hooktest,echo", inputs={"text": "kept"})  # an entry whose outputs name it
    cache_cmd.cmd_prune(argparse.Namespace(older_than=None, images=True, dry_run=False, json=True))
    assert json.loads(capsys.readouterr().out)["resources"] == []
    assert ("prune", True, False) in recorder.events


def test_cmx_register_detectors_adds_a_fact(recorder: Recorder) -> None:
    assert api.detect_facts(["hooktest_fact"])["hooktest_fact"] == {"answer": 42}


def test_cmx_register_executors_is_selectable(recorder: Recorder) -> None:
    result = api.run(tags="hooktest,echo", executor="hooktest-exec")
    assert ("executor", "hooktest-echo") in recorder.events
    assert result.status == "completed"


def test_cmx_register_commands_adds_a_cli_command(
    recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooktest-cmd", "--times", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"times": 3}


def test_cmx_register_exporters_adds_an_export_format(
    recorder: Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = api.run(tags="hooktest,echo")
    dest = tmp_path / "ids.json"
    assert main(["results", "export", "--format", "hooktest-ids", str(dest), result.run_id]) == 0
    assert json.loads(dest.read_text()) == [result.run_id]


def test_cmx_register_suites_adds_a_suite_and_its_section(recorder: Recorder) -> None:
    from cmx_core.errors import ResultsError
    from cmx_core.providers.values import ResultPart
    from cmx_core.results.examples import example_document
    from cmx_core.results.validate import validate_document

    suites = plugins.get_registry().suites
    assert suites["hooktest-suite"].plugin == "hooktest" and suites["hooktest-suite"].section == "hooktest"
    part = ResultPart(status="valid", benchmark={"suite": "hooktest-suite", "task": "t"},
                      sections={"hooktest": {"n": 1}})
    document = example_document(recorder.recipes, part=part)
    validate_document(document, suites=suites)
    document["hooktest"]["n"] = "one"
    with pytest.raises(ResultsError, match=r"\$\.hooktest\.n must be integer \(section of suite 'hooktest-suite'"):
        validate_document(document, suites=suites)


def test_plugins_list_shows_the_hooks(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "list", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert set(listed["hooktest"]["hooks"]) == set(_hook_names())
    assert listed["hooktest"]["provides"]["steps"] == ["hooktest.echo"]
    assert listed["hooktest"]["provides"]["sandboxes"] == ["hooktest-box"]
    assert listed["hooktest"]["provides"]["launchers"] == ["hooktest-launch"]
    assert listed["cmx-core"]["provides"]["launchers"] == ["env", "mpirun", "none", "torchrun"]


def _hook_names() -> list[str]:
    from cmx_core.plugins import hookspecs

    return [n for n in vars(hookspecs) if n.startswith("cmx_")]


def test_cmx_node_failed_reaches_the_plugin_through_the_event_sink(recorder: Recorder) -> None:
    from cmx_core.plugins.events import registry_events

    registry_events(plugins.get_registry())("cmx_node_failed", node_id="n1", recipe="hooktest-echo",
                                            error="step 1 exited 3", wall_s=0.5)
    assert ("failed", "hooktest-echo", "step 1 exited 3", True) in recorder.events


def test_cmx_repo_recipes_translates_an_added_repository(recorder: Recorder, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    source = tmp_path / "foreign"
    source.mkdir()
    (source / "hooktest.txt").write_text("bonjour\n")
    for args in (["init", "-q", "-b", "main"], ["add", "hooktest.txt"], ["commit", "-q", "-m", "greeting"]):
        subprocess.run(["git", "-C", str(source), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                       check=True, capture_output=True)
    assert main(["repo", "add", str(source), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "hooktest"
    result = api.run(tags="hooktest,greet")
    assert result.document["outputs"]["echoed"] == "bonjour"
    assert result.document["provenance"]["repos"][0]["kind"] == "hooktest"
    assert [e for e in recorder.events if e[0] == "repo"]  # translated from the checked-out tree
