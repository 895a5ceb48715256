"""The conformance kit tested against itself: each case below applies one deliberate bug to a
copy of examples/cmx-textstats and runs the copy's conformance test; the kit must fail, and
in the kit test that is meant to catch that bug. The unmutated copy must pass.

The copy is made importable without pip: its ``src`` goes on ``PYTHONPATH`` and its real
distribution metadata (``*.dist-info`` with the entry point and the cmx-core requirement) is
written by hatchling's own core-metadata writer from the copy's
pyproject.toml, so a mutated requirement is what ``importlib.metadata`` reads. Each case is
one pytest subprocess (two at a time).

The bugs, one per case (file, what changes, the kit test that must fail):

 1 import-error        plugin.py imports a module that does not exist     -> test_entry_point_loads
 2 unknown-hook        a misspelt hook name (cmx_recipe_path)              -> test_hookimpls_match_hookspecs
 3 extra-hook-arg      a hook takes an argument its spec lacks             -> test_hookimpls_match_hookspecs
 4 no-core-dep         pyproject drops the cmx-core requirement            -> test_accepts_this_cmx_core
 5 core-excluded       it requires cmx-core>=9,<10                         -> test_accepts_this_cmx_core
 6 core-open-ended     it requires cmx-core>=0.1 (no upper bound)          -> test_accepts_this_cmx_core
 7 register-raises     cmx_register_detectors raises                       -> test_loads_without_errors
 8 bad-step-name       a step named 'TextStats.Top'                        -> test_provider_metadata
 9 multiline-summary   a step summary of two lines                         -> test_provider_metadata
10 dotted-fact         a detector named 'text.encoding' (unreachable)      -> test_provider_metadata
11 run-not-callable    a step's run is a string                            -> test_provider_metadata
12 detector-type       the detector declares dict and returns a str        -> test_detectors_return_their_declared_types
13 detector-raises     the detector raises OSError                         -> test_detectors_return_their_declared_types
14 example-schema      a step example breaks its params_schema (n: 0)      -> test_step_examples_match_their_schemas
15 example-key         a step example uses a key that is not a param       -> test_step_examples_match_their_schemas
16 recipe-invalid      a recipe with an unknown top-level key              -> test_recipes_validate_and_use_known_steps
17 recipe-unknown-step a recipe uses a step type nobody provides           -> test_recipes_validate_and_use_known_steps
18 recipe-no-plan      a recipe depends on tags no recipe has              -> test_recipes_plan
19 unsampled-step      a third step with no sample and no reason           -> test_every_step_has_a_sample
20 non-json-output     a step returns a set as an output                   -> test_steps_run_on_samples
21 missing-output      textstats.count drops its counts from its outputs   -> test_steps_run_on_samples
22 metric-no-unit      a metric with an empty unit                         -> test_steps_run_on_samples
23 metric-nan          a metric whose value is NaN                         -> test_steps_run_on_samples
24 metric-inf          a metric whose value is inf                         -> test_steps_run_on_samples
25 unknown-suite       the result part names a suite nobody registers      -> test_steps_run_on_samples
26 heavy-import        plugin.py imports jsonschema at import time         -> test_import_is_light
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cmx-textstats"
PLUGIN = "src/cmx_textstats/plugin.py"
COUNT = "src/cmx_textstats/count.py"
TOP = "src/cmx_textstats/recipes/textstats-top.yaml"
PYPROJECT = "pyproject.toml"
CORE_DEP = 'dependencies = ["cmx-core>=0.1,<0.2"]'
TOP_STEP = 'name="textstats.top",\n            summary="The most frequent words of a text file",'


@dataclass(frozen=True)
class Bug:
    """One deliberate bug: replace ``old`` (which must occur) by ``new`` in ``file``."""

    name: str
    file: str
    old: str
    new: str
    caught_by: str


BUGS = (
    Bug("import-error", PLUGIN, "from cmx_core.api import",
        "import cmx_textstats_no_such_helper\nfrom cmx_core.api import", "test_entry_point_loads"),
    Bug("unknown-hook", PLUGIN, "def cmx_recipe_paths()", "def cmx_recipe_path()", "test_hookimpls_match_hookspecs"),
    Bug("extra-hook-arg", PLUGIN, "def cmx_register_detectors(register: Callable[[Detector], None])",
        "def cmx_register_detectors(register: Callable[[Detector], None], machine: str)",
        "test_hookimpls_match_hookspecs"),
    Bug("no-core-dep", PYPROJECT, CORE_DEP, "dependencies = []", "test_accepts_this_cmx_core"),
    Bug("core-excluded", PYPROJECT, CORE_DEP, 'dependencies = ["cmx-core>=9,<10"]', "test_accepts_this_cmx_core"),
    Bug("core-open-ended", PYPROJECT, CORE_DEP, 'dependencies = ["cmx-core>=0.1"]', "test_accepts_this_cmx_core"),
    Bug("register-raises", PLUGIN, "    register(Detector(",
        "    raise RuntimeError('no detectors today')\n    register(Detector(", "test_loads_without_errors"),
    Bug("bad-step-name", PLUGIN, 'name="textstats.top"', 'name="TextStats.Top"', "test_provider_metadata"),
    Bug("multiline-summary", PLUGIN, TOP_STEP,
        'name="textstats.top",\n            summary="The most frequent words\\nof a text file",',
        "test_provider_metadata"),
    Bug("dotted-fact", PLUGIN, 'name="text_encoding"', 'name="text.encoding"', "test_provider_metadata"),
    Bug("run-not-callable", PLUGIN, "run=_top,", 'run="cmx_textstats.count:top",  # type: ignore[arg-type]',
        "test_provider_metadata"),
    Bug("detector-type", PLUGIN, 'return {"preferred": locale.getpreferredencoding(False).lower(), ',
        'return locale.getpreferredencoding(False).lower()  # type: ignore[return-value]\n    _ = {',
        "test_detectors_return_their_declared_types"),
    Bug("detector-raises", PLUGIN, "    import locale\n", "    import locale\n\n    raise OSError('no locale here')\n",
        "test_detectors_return_their_declared_types"),
    Bug("example-schema", PLUGIN, '{"path": "notes.txt", "n": 3}', '{"path": "notes.txt", "n": 0}',
        "test_step_examples_match_their_schemas"),
    Bug("example-key", PLUGIN, '"encoding": "latin-1"}', '"encodng": "latin-1"}',
        "test_step_examples_match_their_schemas"),
    Bug("recipe-invalid", TOP, "outputs:", "output:", "test_recipes_validate_and_use_known_steps"),
    Bug("recipe-unknown-step", TOP, "uses: textstats.top", "uses: textstats.tops",
        "test_recipes_validate_and_use_known_steps"),
    Bug("recipe-no-plan", TOP, "steps:", "deps:\n  - {tags: [textstats, nowhere]}\nsteps:", "test_recipes_plan"),
    Bug("unsampled-step", PLUGIN, "    register(\n        StepType(\n            name=\"textstats.top\"",
        "    register(StepType(name=\"textstats.chars\", summary=\"Count characters\", run=_count))\n"
        "    register(\n        StepType(\n            name=\"textstats.top\"", "test_every_step_has_a_sample"),
    Bug("non-json-output", COUNT, 'outputs={"top": [{"word": w, "count": c} for w, c in ranked]}',
        'outputs={"top": {w for w, c in ranked}}', "test_steps_run_on_samples"),
    Bug("missing-output", COUNT, 'outputs={**counts, "path": str(path)}', 'outputs={"path": str(path)}',
        "test_steps_run_on_samples"),
    Bug("metric-no-unit", COUNT, "Metric(value, name, higher_is_better=True)",
        'Metric(value, "", higher_is_better=True)', "test_steps_run_on_samples"),
    Bug("metric-nan", COUNT, "Metric(value, name, higher_is_better=True)",
        'Metric(float("nan") if name == "bytes" else value, name, higher_is_better=True)', "test_steps_run_on_samples"),
    Bug("metric-inf", COUNT, "Metric(value, name, higher_is_better=True)",
        'Metric(float("inf") if name == "lines" else value, name, higher_is_better=True)', "test_steps_run_on_samples"),
    Bug("unknown-suite", COUNT, '"suite": "custom"', '"suite": "textstats"', "test_steps_run_on_samples"),
    Bug("heavy-import", PLUGIN, "from cmx_core.api import", "import jsonschema  # noqa: F401\nfrom cmx_core.api import",
        "test_import_is_light"),
)


@dataclass(frozen=True)
class KitRun:
    code: int
    failed: frozenset[str]
    output: str


def _copy(tmp: Path, bug: Bug | None) -> Path:
    copy = tmp / "cmx-textstats"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist"))
    if bug is not None:
        target = copy / bug.file
        text = target.read_text(encoding="utf-8")
        assert text.count(bug.old) == 1, f"bug {bug.name}: {bug.old!r} occurs {text.count(bug.old)} times in {bug.file}"
        target.write_text(text.replace(bug.old, bug.new), encoding="utf-8")
    return copy


def _metadata(copy: Path, site: Path) -> None:
    """The copy's dist-info as its wheel would hold it: METADATA from hatchling's own core
    metadata writer over the copy's pyproject.toml, entry_points.txt from its entry points."""
    from hatchling.metadata.core import ProjectMetadata
    from hatchling.metadata.spec import DEFAULT_METADATA_VERSION, get_core_metadata_constructors
    from hatchling.plugin.manager import PluginManager

    project = ProjectMetadata(str(copy), PluginManager())
    info = site / f"{project.core.name.replace('-', '_')}-{project.version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(get_core_metadata_constructors()[DEFAULT_METADATA_VERSION](project),
                                   encoding="utf-8")
    lines = [line for group, entries in project.core.entry_points.items()
             for line in (f"[{group}]", *(f"{k} = {v}" for k, v in entries.items()), "")]
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")


def run_kit(tmp: Path, bug: Bug | None) -> KitRun:
    """Apply ``bug`` to a fresh copy in ``tmp`` and run the copy's conformance test."""
    copy = _copy(tmp, bug)
    _metadata(copy, tmp / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp / "site"), str(copy / "src")]),
           "CMX_HOME": str(tmp / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    for name in ("CMX_LOAD_PLUGINS", "CMX_STRICT_PLUGINS", "CMX_DISABLE_PLUGINS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--import-mode=importlib",
         "--rootdir", str(copy), str(copy / "tests" / "test_textstats_conformance.py")],
        env=env, cwd=copy, capture_output=True, text=True, timeout=300, check=False)
    failed = frozenset(re.findall(r"(?:FAILED|ERROR) \S+::TestTextstatsConformance::(\w+)", done.stdout))
    return KitRun(done.returncode, failed, done.stdout[-4000:] + done.stderr[-2000:])


@pytest.fixture(scope="module")
def kit_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KitRun]:
    """Every case and the unmutated baseline, two subprocesses at a time."""
    cases: list[Bug | None] = [None, *BUGS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = pool.map(lambda bug: run_kit(tmp_path_factory.mktemp("mutant"), bug), cases)
        return {bug.name if bug else "baseline": run for bug, run in zip(cases, runs, strict=True)}


def test_the_cases_are_distinct_and_documented() -> None:
    names = [bug.name for bug in BUGS]
    assert len(names) == len(set(names)) >= 22
    doc = __doc__ or ""
    for number, bug in enumerate(BUGS, 1):
        assert re.search(rf"^\s*{number} {re.escape(bug.name)} .*-> {bug.caught_by}$", doc, re.MULTILINE), bug.name


def test_the_unmutated_example_passes_the_kit(kit_runs: dict[str, KitRun]) -> None:
    baseline = kit_runs["baseline"]
    assert baseline.code == 0 and not baseline.failed, baseline.output


@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_the_kit_catches_the_bug(bug: Bug, kit_runs: dict[str, KitRun]) -> None:
    run = kit_runs[bug.name]
    assert run.code == 1, run.output
    expected = f"{bug.name}: expected {bug.caught_by} to fail, failed: {sorted(run.failed)}\n"
    assert bug.caught_by in run.failed, expected + run.output


def test_the_kit_catches_every_bug(kit_runs: dict[str, KitRun]) -> None:
    caught = [bug.name for bug in BUGS if bug.caught_by in kit_runs[bug.name].failed]
    print(f"the conformance kit caught {len(caught)} of {len(BUGS)} deliberate bugs")
    assert len(caught) == len(BUGS), sorted(set(b.name for b in BUGS) - set(caught))
