"""Conformance kit for plugin authors (a pytest plugin shipped with cmx-core).

Subclass :class:`PluginConformance` in your plugin's tests and name the entry point::

    from cmx_core.testing import PluginConformance, StepSample

    class TestHelloConformance(PluginConformance):
        plugin = "hello"                      # [project.entry-points.cmx] hello = ...
        step_samples = {"hello.greet": StepSample(params={"who": "world"},
                                                  expect_outputs=("greeting",))}

pytest then proves that the plugin loads through its real entry point, that its hookimpls
match cmx's hookspecs (``check_pending``), that it accepts this cmx-core, that its providers
carry valid metadata, that its recipes validate and use only step types that exist, that
importing it stays light, that each step runs on the sample you give, that each detector
returns its declared type, that each step's examples match its schema and that each
shipped recipe plans.

Loaded by pytest through the ``pytest11`` entry point in every environment that has
cmx-core, so importing this module is cheap: cmx-core itself is imported inside the tests.
It also offers the ``cmx_home`` and ``cmx_step_context`` fixtures and :class:`IsolatedEnv`
(a throwaway virtual environment) for tests that install packages.
"""

from __future__ import annotations

import dataclasses
import json
import os
import site
import subprocess
import sys
import tempfile
import textwrap
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import pluggy
import pytest
from packaging.requirements import Requirement

from cmx_core.api import (
    Capabilities,
    ExecutionContext,
    ExecutionRequest,
    ExecutorSettings,
    Launcher,
    NoSettings,
    ResultPart,
    StepContext,
    StepOutput,
)
from cmx_core.datautil import freeze
from cmx_core.errors import CmxError
from cmx_core.facts.store import FactStore
from cmx_core.plugins import hookspecs
from cmx_core.plugins import loader as plugins
from cmx_core.plugins.loader import get_registry, load_registry
from cmx_core.recipes.load import load_recipe_file
from cmx_core.results.document import RunRecord, build_document
from cmx_core.results.validate import validate_document
from cmx_core.run import engine
from cmx_core.run.request import RunRequest
from cmx_core.run.runids import new_run_id
from cmx_core.run.settings import convert, describe_settings
from cmx_core.testing.checks import (
    detector_problems,
    example_problems,
    fact_name_problems,
    metric_value_problems,
    own,
    plan_problems,
    recipe_files,
    required_inputs,
    requirement_problems,
)

HEAVY_MODULES = (
    "torch", "numpy", "pandas", "scipy", "sklearn", "transformers", "jsonschema", "rich",
    "jinja2", "docker", "requests", "httpx", "pynvml",
)
"""Modules a plugin must not import when its entry-point module is imported."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: builds wheels or virtual environments (minutes); part of the full suite"
    )


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def cmx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``CMX_HOME`` (cache, data, results) for one test."""
    home = tmp_path / "cmx-home"
    home.mkdir()
    monkeypatch.setenv("CMX_HOME", str(home))
    for name in ("CMX_CACHE_DIR", "CMX_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def cmx_step_context(tmp_path: Path) -> Callable[..., Any]:
    """A factory of :class:`~cmx_core.api.StepContext` objects with private directories."""

    def make(sample: StepSample | None = None, **kwargs: Any) -> Any:
        return make_step_context(tmp_path / f"step{len(list(tmp_path.iterdir()))}", sample, **kwargs)

    return make


def make_step_context(
    base: Path,
    sample: StepSample | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    node_id: str = "conformance",
    timeout_s: float | None = None,
) -> Any:
    """A StepContext as the engine builds it: frozen mappings, fresh work/log/run dirs, of
    recipe ``conformance`` (``dataclasses.replace`` sets any other field), the loaded
    registry's launchers (a step looks its ``launcher:`` up there). The step's params,
    inputs, deps, facts and variations are the ``sample``'s (none without one); ``params``
    and ``inputs``, when given, replace the sample's (most tests give only those)."""
    given = sample or StepSample()
    dirs = {name: base / name for name in ("work", "logs", "run", "cache")}
    for directory in dirs.values():
        directory.mkdir(parents=True, exist_ok=True)
    return StepContext(
        node_id=node_id, recipe="conformance", params=freeze(params if params is not None else given.params),
        inputs=freeze(inputs if inputs is not None else given.inputs), deps=freeze(given.deps),
        facts=freeze(given.facts), variations=freeze(given.variations), work_dir=dirs["work"], log_dir=dirs["logs"],
        run_dir=dirs["run"], cache_dir=dirs["cache"], timeout_s=timeout_s, launchers=registered_launchers(),
    )


def registered_launchers() -> Mapping[str, Launcher]:
    """The launchers of the loaded plugin registry by name, as the engine hands them to a step
    (``StepContext.launchers``): for a test that wraps a command the way a step would."""
    return get_registry().launchers


def processes_with(marker: str, *, at_start: bool = False) -> list[int]:
    """PIDs of the live processes but this one whose command line (its arguments joined by
    spaces) contains ``marker``, or starts with it: for "nothing is left running" checks."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if line.startswith(marker) if at_start else marker in line:
            found.append(int(entry.name))
    return found


def exit_code_recipe(name: str, tag: str) -> str:
    """A recipe (YAML text) tagged ``test, sweep, <tag>`` whose one shell step exits with its
    integer input ``code`` (0 to 9; a larger one is refused when the point is planned): for
    tests of failed and refused sweep points."""
    return textwrap.dedent(f"""\
        name: {name}
        tags: [test, sweep, {tag}]
        summary: exits with the code it is given
        inputs:
          code: {{type: integer, default: 0, min: 0, max: 9}}
        steps:
          - uses: shell
            with: {{cmd: [sh, -c, "exit {{{{ inputs.code }}}}"]}}
        """)


# --------------------------------------------------------------------------- the kit


@dataclass(frozen=True)
class StepSample:
    """A sample input for one step type and what its output must hold."""

    params: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)
    deps: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    variations: Mapping[str, Any] = field(default_factory=dict)
    expect_outputs: Collection[str] = ()


def execution_request(plan: Any, run_dir: Path, *, settings: Any = None, recovery: Any = None,
                      **given: Any) -> Any:
    """A real :class:`~cmx_core.api.ExecutionRequest` for ``plan`` (from ``cmx_core.api.plan``)
    as the engine would hand it to an executor: the current registry and facts, ``run_dir``
    created with the plan's ``lock.json`` in it, a fresh run id; ``recovery`` the command
    line's recovery policy and injections (docs/faults.md). ``given`` sets the request's
    other fields by name (``jobs``, ``use_cache``, ``refresh``; by default 1, True, False)."""
    jobs, use_cache, refresh = given.pop("jobs", 1), given.pop("use_cache", True), given.pop("refresh", False)
    if given:
        raise TypeError(f"execution_request() got unexpected keyword arguments: {', '.join(sorted(given))}")
    context = execution_context(plan, settings)
    if recovery is not None:
        context = replace(context, recovery=recovery)
    run_dir.mkdir(parents=True, exist_ok=True)
    engine.write_lock(run_dir, plan, context.registry)
    return ExecutionRequest(context, run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id(),
                            jobs=jobs, use_cache=use_cache, refresh=refresh)


def execution_context(plan: Any, settings: Any = None) -> Any:
    """A real :class:`~cmx_core.api.ExecutionContext` for ``plan`` (from ``cmx_core.api.plan``)
    as the engine hands it to an executor's ``check_plan`` and ``describe``: ``settings``
    (default: none), the current registry, and the facts the plan was made with (its facts
    file, or this machine)."""
    registry = get_registry()
    facts = FactStore.from_file(plan.facts_file, registry.detectors) if plan.facts_file \
        else FactStore(registry.detectors)
    return ExecutionContext(plan, settings if settings is not None else NoSettings(), facts, registry)


class PluginConformance:
    """Base class of a plugin's conformance tests; subclass it as ``Test<Something>``.

    Set :attr:`plugin` (the entry-point name). For each step type the plugin registers, give
    a :class:`StepSample` in :attr:`step_samples` (or build one in :meth:`step_sample`, which
    gets a temporary directory for input files), or say in :attr:`unsampled_steps` why it
    cannot run here (needs a GPU...). Override :meth:`check_step_output` for your own checks.
    Each executor the plugin registers must have typed, documented settings, and runs
    cmx-core's demo chain (with :attr:`executor_options`) to a result equal to the local
    executor's, unless :attr:`unrun_executors` says why it cannot run here.
    """

    plugin: ClassVar[str] = ""
    step_samples: ClassVar[Mapping[str, StepSample]] = {}
    unsampled_steps: ClassVar[Mapping[str, str]] = {}
    executor_options: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    """Per executor, the ``--executor-opt`` values its sample run uses."""
    unrun_executors: ClassVar[Mapping[str, str]] = {}
    """Executors that cannot run a plan here, each with the reason (needs a cluster...)."""
    requires_plugins: ClassVar[tuple[str, ...]] = ()
    allowed_imports: ClassVar[tuple[str, ...]] = ()
    recipe_inputs: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """Per shipped recipe (by name), the inputs its plan is made with."""
    fixture_facts: ClassVar[Path | None] = None
    """A facts file (``cmx detect --json`` output) the recipes are planned against; None:
    this machine's facts."""

    # ----------------------------------------------------------- extension points

    def step_sample(self, step: str, tmp_path: Path) -> StepSample | None:
        """The sample for ``step``; the default looks it up in :attr:`step_samples`."""
        return self.step_samples.get(step)

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        """Extra assertions on a step's :class:`~cmx_core.api.StepOutput`."""

    def recipe_sample(self, recipe: str, tmp_path: Path) -> Mapping[str, Any]:
        """The inputs recipe ``recipe`` is planned with, over stand-ins for its required
        inputs (an empty directory for a path...); the default looks it up in
        :attr:`recipe_inputs` (override it to write input files into ``tmp_path``)."""
        return self.recipe_inputs.get(recipe, {})

    # ----------------------------------------------------------- fixtures

    @pytest.fixture
    def conformance_registry(self, cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
        """The plugin (and the plugins it requires) loaded the way ``cmx`` loads them."""
        assert self.plugin, f"{type(self).__name__}.plugin must name the cmx entry point"
        monkeypatch.setenv("CMX_LOAD_PLUGINS", ",".join((self.plugin, *self.requires_plugins)))
        registry = load_registry()
        registry.collect_all()
        return registry

    # ----------------------------------------------------------- tests

    def test_entry_point_loads(self) -> None:
        entry = _entry_point(self.plugin)
        module = entry.load()
        assert module is not None
        assert entry.dist is not None, f"entry point '{self.plugin}' belongs to no distribution"

    def test_hookimpls_match_hookspecs(self) -> None:
        manager = pluggy.PluginManager(hookspecs.PROJECT)
        manager.add_hookspecs(hookspecs)
        module = _entry_point(self.plugin).load()
        manager.register(module, name=self.plugin)
        manager.check_pending()
        hooks = [c.name for c in manager.get_hookcallers(module) or []]
        assert hooks, f"plugin '{self.plugin}' implements no cmx hook"

    def test_accepts_this_cmx_core(self) -> None:
        problems = requirement_problems(_entry_point(self.plugin).dist)
        assert not problems, "\n".join(problems)

    def test_loads_without_errors(self, conformance_registry: Any) -> None:
        info = conformance_registry.plugins.get(self.plugin)
        assert info is not None, f"plugin '{self.plugin}' was not loaded"
        assert info.error is None, f"plugin '{self.plugin}' failed to load: {info.error}"
        assert not conformance_registry.conflicts, conformance_registry.conflicts

    def test_provider_metadata(self, conformance_registry: Any) -> None:
        problems = provider_problems(conformance_registry, self.plugin)
        problems += fact_name_problems(conformance_registry, self.plugin)
        assert not problems, "\n".join(problems)

    def test_detectors_return_their_declared_types(self, conformance_registry: Any) -> None:
        problems = detector_problems(conformance_registry, self.plugin)
        assert not problems, "\n".join(problems)

    def test_step_examples_match_their_schemas(self, conformance_registry: Any, tmp_path: Path) -> None:
        (tmp_path / "inputs").mkdir(exist_ok=True)
        samples = {}
        for name in _own(conformance_registry, "steps", self.plugin):
            sample = self.step_sample(name, tmp_path / "inputs")
            if sample is not None:
                samples[name] = sample.params
        problems = example_problems(conformance_registry, self.plugin, samples)
        assert not problems, "\n".join(problems)

    def test_recipes_plan(self, conformance_registry: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(plugins, "_REGISTRY", conformance_registry)
        problems: list[str] = []
        for path in recipe_files(conformance_registry, self.plugin):
            try:
                name = load_recipe_file(path).name
            except Exception:  # noqa: BLE001 - test_recipes_validate_and_use_known_steps names it
                continue
            (tmp_path / name).mkdir(exist_ok=True)
            stand_ins = required_inputs(path, tmp_path / name / "stand-ins")
            inputs = {**stand_ins, **self.recipe_sample(name, tmp_path / name)}
            problems += plan_problems(path, inputs, self.fixture_facts)
        assert not problems, "\n".join(problems)

    def test_recipes_validate_and_use_known_steps(self, conformance_registry: Any) -> None:
        problems = recipe_problems(conformance_registry, self.plugin)
        assert not problems, "\n".join(problems)

    def test_every_step_has_a_sample(self, conformance_registry: Any, tmp_path: Path) -> None:
        (tmp_path / "inputs").mkdir(exist_ok=True)
        missing = [
            name for name in _own(conformance_registry, "steps", self.plugin)
            if name not in self.unsampled_steps and self.step_sample(name, tmp_path / "inputs") is None
        ]
        assert not missing, (
            f"give a StepSample (step_samples) or a reason (unsampled_steps) for: {missing}")

    def test_steps_run_on_samples(self, conformance_registry: Any, tmp_path: Path) -> None:
        ran = 0
        (tmp_path / "inputs").mkdir(exist_ok=True)
        for name, step in _own(conformance_registry, "steps", self.plugin).items():
            sample = self.step_sample(name, tmp_path / "inputs")
            if sample is None:
                continue
            ctx = replace(make_step_context(tmp_path / name, sample, node_id=f"conformance/{name}"),
                          launchers=conformance_registry.launchers)
            raw = step.run(ctx)
            output = raw if isinstance(raw, StepOutput) else StepOutput(outputs=dict(raw))
            problems = output_problems(name, output, sample, suites=conformance_registry.suites)
            assert not problems, "\n".join(problems)
            self.check_step_output(name, output, sample)
            ran += 1
        if not _own(conformance_registry, "steps", self.plugin):
            return
        assert ran or self.unsampled_steps, "no step of the plugin ran on a sample"

    def test_executor_settings_are_typed_and_documented(self, conformance_registry: Any) -> None:
        problems = executor_problems(conformance_registry, self.plugin)
        assert not problems, "\n".join(problems)

    def test_executors_run_the_demo_chain(self, conformance_registry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(plugins, "_REGISTRY", conformance_registry)
        for name in _own(conformance_registry, "executors", self.plugin):
            if name in self.unrun_executors:
                continue
            problems = executor_run_problems(name, self.executor_options.get(name, {}))
            assert not problems, "\n".join(problems)

    def test_import_is_light(self) -> None:
        module = _entry_point(self.plugin).value.split(":")[0]
        heavy = [m for m in HEAVY_MODULES if m not in self.allowed_imports]
        code = textwrap.dedent(f"""
            import importlib, json, sys
            importlib.import_module({module!r})
            print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        imported = json.loads(done.stdout.strip().splitlines()[-1])
        assert not imported, (
            f"importing {module} imports {imported}; import them inside functions "
            "(or list them in allowed_imports)")


# --------------------------------------------------------------------------- checks


def _entry_point(name: str) -> Any:
    found = [e for e in metadata.entry_points(group="cmx") if e.name == name]
    assert found, f"no entry point '{name}' in group 'cmx'; is the plugin installed?"
    assert len(found) == 1, f"entry point '{name}' is declared by several distributions"
    return found[0]


def _core_requirement(dist: Any) -> Any:
    for text in dist.requires or []:
        req = Requirement(text)
        if req.name.replace("_", "-").lower() == "cmx-core" and req.marker is None:
            return req
    return None


def _own(registry: Any, kind: str, plugin: str) -> dict[str, Any]:
    return own(registry, kind, plugin)


_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789._-")


def provider_problems(registry: Any, plugin: str) -> list[str]:
    """Metadata problems of every provider ``plugin`` registered (empty: all valid)."""
    problems: list[str] = []
    callables = {"steps": ("run", "validate"), "detectors": ("detect", "fingerprint"),
                 "executors": ("run",), "commands": ("configure", "run"),
                 "exporters": ("export",)}
    for kind, fields in callables.items():
        for name, provider in _own(registry, kind, plugin).items():
            where = f"{kind[:-1]} '{name}'"
            if not name or not set(name) <= _NAME_CHARS or not name[0].isalpha():
                problems.append(f"{where}: names are lower-case [a-z0-9._-], starting a-z")
            summary = provider.summary
            if not isinstance(summary, str) or not summary.strip() or "\n" in summary:
                problems.append(f"{where}: summary must be one non-empty line")
            for attr in fields:
                value = getattr(provider, attr)
                if value is not None and not callable(value):
                    problems.append(f"{where}: {attr} must be callable, not {value!r}")
                if value is None and attr in ("run", "detect", "export", "configure"):
                    problems.append(f"{where}: {attr} is required")
            caps = getattr(provider, "capabilities", Capabilities())
            if not isinstance(caps, Capabilities):
                problems.append(f"{where}: capabilities must be a Capabilities, not {caps!r}")
            params = getattr(provider, "params", {})
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
                problems.append(f"{where}: params maps names to one-line descriptions")
    return problems


def executor_problems(registry: Any, plugin: str) -> list[str]:
    """Problems of the executors ``plugin`` registers: settings that are not an
    :class:`~cmx_core.api.ExecutorSettings` dataclass (frozen, as its base is), a setting
    without help or of a type ``--executor-opt`` cannot give, a ``check_plan`` that is not
    callable."""
    problems: list[str] = []
    for name, executor in _own(registry, "executors", plugin).items():
        where = f"executor '{name}'"
        cls = executor.settings
        if not (isinstance(cls, type) and issubclass(cls, ExecutorSettings) and dataclasses.is_dataclass(cls)):
            problems.append(f"{where}: settings must be a dataclass deriving from ExecutorSettings, not {cls!r}")
            continue
        try:
            rows = describe_settings(cls)
            cls()
        except (CmxError, TypeError) as exc:
            problems.append(f"{where}: settings {cls.__qualname__}: {exc}")
            continue
        problems += [f"{where}: setting '{row.name}' has no help (field(metadata={{'help': ...}}))"
                     for row in rows if not row.help.strip()]
        problems += _unparsable_settings(where, cls)
        if executor.check_plan is not None and not callable(executor.check_plan):
            problems.append(f"{where}: check_plan must be callable")
    return problems


def _unparsable_settings(where: str, cls: Any) -> list[str]:
    """Every setting must accept the text of its own default (``--executor-opt k=<default>``)."""
    problems = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        text = ",".join(default) if isinstance(default, tuple) else "none" if default is None else str(default)
        try:
            convert(where, f.name, hints[f.name], text)
        except CmxError as exc:
            problems.append(f"{where}: setting '{f.name}' cannot be given on the command line: {exc}")
    return problems


def executor_run_problems(executor: str, options: Mapping[str, str]) -> list[str]:
    """Run cmx-core's demo chain (``demo,sort`` on 2,000 integers) with ``executor`` and the
    local executor; the two results must agree on everything but ids, times and measured
    values, and the executor's must be a recorded, indexed, schema-valid result."""
    inputs = {"size": "2000", "repeats": "1"}
    try:
        theirs = engine.run(RunRequest("demo,sort", inputs, executor=executor, options=options))
    except CmxError as exc:
        return [f"executor '{executor}' cannot run the demo chain: {exc}"]
    ours = engine.run(RunRequest("demo,sort", inputs, executor="local"))
    problems = []
    for key in ("status", "benchmark", "outputs", "invalid_reasons", "error"):
        if key == "outputs":
            same = sorted(theirs.document[key]) == sorted(ours.document[key])
        else:
            same = theirs.document[key] == ours.document[key]
        if not same:
            problems.append(f"executor '{executor}': the result's {key} differs from the local executor's: "
                            f"{theirs.document[key]!r} != {ours.document[key]!r}")
    units = {k: v["unit"] for k, v in theirs.document["metrics"].items()}
    if units != {k: v["unit"] for k, v in ours.document["metrics"].items()}:
        problems.append(f"executor '{executor}': metrics {units} differ from the local executor's")
    if theirs.result_path != theirs.run_dir / "result.json":
        problems.append(f"executor '{executor}': the result is not the run directory's result.json")
    return problems


def recipe_problems(registry: Any, plugin: str) -> list[str]:
    """Recipes of ``plugin`` that do not load or use step types nobody provides."""
    problems: list[str] = []
    directories = [Path(p) for name, p in registry.recipe_paths if name == plugin]
    for directory in directories:
        if not directory.is_dir():
            problems.append(f"recipe path {directory} is not a directory")
            continue
        for path in sorted(directory.rglob("*.yaml")):
            try:
                uses = recipe_step_types(path)
            except Exception as exc:  # noqa: BLE001 - a CmxError names file, line, key
                problems.append(str(exc).splitlines()[0] if str(exc) else repr(exc))
                continue
            for step in uses:
                if "{{" in step:
                    continue  # a templated `uses:` is resolved at plan time
                try:
                    registry.step(step)
                except Exception as exc:  # noqa: BLE001 - PluginError with the install hint
                    problems.append(f"{path}: {exc}")
    return problems


def recipe_step_types(path: Path) -> list[str]:
    """The ``uses:`` values of a recipe file, loaded and validated by cmx-core."""
    recipe = load_recipe_file(path)
    return [step.uses for step in recipe.steps]


def output_problems(step: str, output: Any, sample: StepSample,
                    suites: Mapping[str, Any] | None = None) -> list[str]:
    """What is wrong with a step's output (empty: nothing)."""
    problems: list[str] = []
    outputs = dict(output.outputs)
    for name in sample.expect_outputs:
        if name not in outputs:
            problems.append(f"step '{step}' did not return output '{name}' (got {sorted(outputs)})")
    try:
        json.dumps(outputs, default=_path_to_str)
    except (TypeError, ValueError) as exc:
        problems.append(f"step '{step}': outputs must be JSON data (or paths): {exc}")
    part = output.result
    if part is not None:
        if not isinstance(part, ResultPart):
            problems.append(f"step '{step}': result must be a ResultPart, not {type(part)}")
        else:
            for mname, metric in part.metrics.items():
                if not getattr(metric, "unit", ""):
                    problems.append(f"step '{step}': metric '{mname}' has no unit")
            problems.extend(metric_value_problems(step, part))
            problems.extend(result_part_problems(step, output, suites))
    return problems


def result_part_problems(step: str, output: Any, suites: Mapping[str, Any] | None = None) -> list[str]:
    """Whether the step's result part makes a schema-valid result document, as cmx would
    write it after a run of a recipe with this one step: with the suites loaded (the
    current registry's when ``suites`` is None), so a suite nobody provides and a section
    that breaks its suite's schema are problems. The current registry is loaded fresh, not
    through the process-wide one, so a narrowed ``CMX_LOAD_PLUGINS`` is never cached."""
    if suites is None:
        suites = load_registry().suites
    now = datetime.now(timezone.utc)
    with tempfile.TemporaryDirectory() as run_dir:
        record = RunRecord(
            run_id="00000000-0000-4000-8000-000000000000", tags=("conformance",), inputs={},
            variations={}, recipe_name="conformance", recipe_tags=("conformance",),
            recipe_version="0", recipes=(("conformance", "0", "0" * 64, "plugin"),),
            plugins=(), facts={}, outputs=dict(output.outputs), part=output.result,
            artifacts=(), run_dir=Path(run_dir), started_at=now, finished_at=now,
            lock_digest=None)
        try:
            validate_document(build_document(record), source=f"step '{step}' result", suites=suites)
        except CmxError as exc:
            return [str(exc).splitlines()[0]]
    return []


def _path_to_str(value: Any) -> str:
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    raise TypeError(f"{type(value).__name__} is not JSON data")


# --------------------------------------------------------------------------- environments


@dataclass
class IsolatedEnv:
    """A throwaway virtual environment for tests that install packages.

    ``IsolatedEnv.create(path)`` makes a fresh venv with its own pip that holds nothing but
    what you install; ``with_pip=False`` leaves even pip out (:meth:`pip` then runs this
    interpreter's pip against it with ``--python``, which skips ensurepip's seconds of CPU);
    ``inherit=True`` makes one without pip that also sees this interpreter's packages
    (cmx-core, pip, pytest), which is fast enough for one-plugin install tests.
    """

    root: Path

    @property
    def python(self) -> Path:
        return self.root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    @classmethod
    def create(cls, root: Path, *, inherit: bool = False, with_pip: bool = True,
               timeout_s: float = 300) -> IsolatedEnv:
        args = [sys.executable, "-m", "venv", str(root)]
        if inherit or not with_pip:
            args.insert(3, "--without-pip")
        subprocess.run(args, check=True, capture_output=True, timeout=timeout_s)
        env = cls(root)
        if inherit:
            env._inherit()
        return env

    def _inherit(self) -> None:
        parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
        code = self.run_python(["-c", "import site; print(site.getsitepackages()[0])"])
        target = Path(code.stdout.strip())
        lines = [f"import site; site.addsitedir({p!r})" for p in parents]
        (target / "_cmx_inherit.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def run_python(
        self, args: list[str], *, env: Mapping[str, str] | None = None, timeout_s: float = 600,
        cwd: Path | None = None, check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run this environment's python; on failure raise with its output (check=True)."""
        return _run_checked([str(self.python), *args], env, timeout_s, cwd, check)

    def pip(self, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
        """pip in this environment: its own, else this interpreter's aimed at it."""
        pip = ["-m", "pip", "--disable-pip-version-check"]
        if (self.python.parent / "pip").exists():
            return self.run_python([*pip, *args], timeout_s=timeout_s)
        return _run_checked([sys.executable, *pip, "--python", str(self.python), *args], None,
                            timeout_s, None, True)


def _run_checked(argv: list[str], env: Mapping[str, str] | None, timeout_s: float, cwd: Path | None,
                 check: bool) -> subprocess.CompletedProcess[str]:
    """``argv`` with this process's environment (plus ``env``, less PYTHONPATH, which would
    reach past the environment under test); on failure raise with its output (check=True)."""
    merged = {**os.environ, **(env or {})}
    merged.pop("PYTHONPATH", None)
    done = subprocess.run(argv, capture_output=True, text=True, env=merged, timeout=timeout_s, cwd=cwd,
                          check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def write_plugin_package(root: Path, name: str, *, module: str, core: str = ">=0.1,<0.2") -> Path:
    """Write a minimal plugin package ``root/cmx-<name>`` (version 0.3.0) whose entry-point
    module ``cmx_<name>.plugin`` holds ``module`` (dedented) and which requires
    ``cmx-core<core>``; for tests of installing, loading and refusing plugins."""
    package = f"cmx_{name.replace('-', '_')}"
    src = root / f"cmx-{name}"
    (src / "src" / package / "recipes").mkdir(parents=True)
    (src / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling>=1.20"]
        build-backend = "hatchling.build"
        [project]
        name = "cmx-{name}"
        version = "0.3.0"
        dependencies = ["cmx-core{core}"]
        [project.entry-points.cmx]
        {name} = "{package}.plugin"
        [tool.hatch.build.targets.wheel]
        packages = ["src/{package}"]
        """), encoding="utf-8")
    (src / "src" / package / "__init__.py").write_text("", encoding="utf-8")
    (src / "src" / package / "plugin.py").write_text(textwrap.dedent(module), encoding="utf-8")
    return src
