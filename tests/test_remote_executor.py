"""The executor contract: a ~50-line RemoteExecutor (tests/remote_plugin) whose far side is
a local child process runs `cmx run --lock` there, and its results equal the local
executor's except for what differs between two runs (ids, times, measured values)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.errors import StepFailed, UsageError
from cmx_core.plugins import loader as plugins
from cmx_core.results.comparable import comparable
from cmx_core.results.store import ResultStore
from cmx_core.run import engine
from tests.remote_plugin import subprocess_executor

NOOP = """\
name: test-remote-noop
tags: [test, remote, noop]
summary: no-op SUT through LoadGen, run by the subprocess executor
steps:
  - uses: mlperf.loadgen
    with:
      sut: noop
      sut_params: {total_sample_count: 1024, performance_sample_count: 256}
      scenario: Offline
      model_name: resnet50
      duration_s: 0.2
"""

FAILING = """\
name: test-remote-fail
tags: [test, remote, fail]
summary: a step that fails on the far side
steps:
  - uses: shell
    with: {cmd: [sh, -c, "echo broken >&2; exit 3"]}
"""


@pytest.fixture
def registry(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[plugins.Registry]:
    loaded = plugins.load_registry(extra=[("subprocess-exec", subprocess_executor)])
    monkeypatch.setattr(plugins, "_REGISTRY", loaded)
    yield loaded


@pytest.mark.parametrize(("tags", "recipe"), [("demo,sort", None), ("test,remote,noop", NOOP)])
def test_subprocess_executor_equals_local(registry: plugins.Registry, tmp_path: Path, tags: str,
                                          recipe: str | None) -> None:
    dirs = []
    if recipe:
        (tmp_path / "r.yaml").write_text(recipe)
        dirs = [tmp_path]
    local = engine.run_tags(tags, recipes_dirs=dirs, executor="local")
    remote = engine.run_tags(tags, recipes_dirs=dirs, executor="subprocess")
    assert comparable(remote.document) == comparable(local.document)
    assert remote.document["status"] in ("valid", "completed")
    series = remote.document["telemetry"]["series"]  # the far side's sampler, its file under this run
    assert series == "remote/telemetry.om" and (remote.run_dir / series).is_file()
    far = json.loads((remote.run_dir / "remote" / "result.json").read_text())
    assert far["run_id"] != remote.run_id  # the far side's own record, folded under the near id
    assert (remote.run_dir / "remote-stage" / "lock.json").read_bytes() == (remote.run_dir / "lock.json").read_bytes()
    indexed = [row.run_id for row in ResultStore(paths.results_db()).list(limit=1000)]
    assert remote.run_id in indexed and far["run_id"] not in indexed


def test_far_side_uses_its_own_facts(registry: plugins.Registry) -> None:
    remote = engine.run_tags("demo,sort", executor="subprocess")
    far_facts = json.loads((remote.run_dir / "remote" / "facts.json").read_text())
    assert remote.document["system"]["cpu"]["model"] == far_facts["cpu"]["model"]


@pytest.mark.parametrize("on_this_host", [False, True])
def test_a_far_side_on_this_host_takes_the_machine_from_this_host(registry: plugins.Registry,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  on_this_host: bool) -> None:
    """A container's hostname and memory are not the machine's: an executor whose far side
    runs here (runs_on_this_host) records this host's machine facts, the far software facts.
    The far side alone is told it is an edge system, so the two sources differ for real."""
    far_env = subprocess_executor.SubprocessExecutor.job_env
    monkeypatch.setattr(subprocess_executor.SubprocessExecutor, "job_env",
                        lambda self, request: {**far_env(self, request), "CMX_SYSTEM_TYPE": "edge"})
    monkeypatch.setattr(subprocess_executor.SubprocessExecutor, "runs_on_this_host", on_this_host)
    monkeypatch.delenv("CMX_SYSTEM_TYPE", raising=False)
    remote = engine.run_tags("demo,sort", executor="subprocess")
    far_facts = json.loads((remote.run_dir / "remote" / "facts.json").read_text())
    assert far_facts["host"]["type"] == "edge"
    assert (remote.document["system"]["type"] == "edge") is not on_this_host
    assert remote.document["software"]["python"] == far_facts["python"]["version"]


def test_the_far_side_is_told_the_engine_commit(registry: plugins.Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """A far cmx installed from a wheel has no .git: the shipping engine passes its commit."""
    from cmx_core.results.gitinfo import ENGINE_COMMIT_ENV, commit_from_env, engine_git_commit

    seen: list[dict[str, str]] = []
    submit = subprocess_executor.SubprocessExecutor.submit
    monkeypatch.setattr(subprocess_executor.SubprocessExecutor, "submit",
                        lambda self, job: seen.append(dict(job.env)) or submit(self, job))
    remote = engine.run_tags("demo,sort", executor="subprocess")
    assert engine_git_commit() and seen[0][ENGINE_COMMIT_ENV] == engine_git_commit()
    assert remote.document["software"]["engine"]["git_commit"] == engine_git_commit()
    assert commit_from_env({ENGINE_COMMIT_ENV: seen[0][ENGINE_COMMIT_ENV]}) == engine_git_commit()
    assert commit_from_env({ENGINE_COMMIT_ENV: "not-a-commit; rm -rf /"}) is None
    assert commit_from_env({}) is None


def test_a_plan_made_for_another_node_is_refused_there_with_the_reason(registry: plugins.Registry,
                                                                       tmp_path: Path) -> None:
    """Planned with --facts of an H100 node; the far side detects its own facts (no H100 here)
    and refuses before any step runs: the error result names what the node lacks, exit 2."""
    (tmp_path / "r.yaml").write_text(
        "name: test-remote-h100\ntags: [test, remote, h100]\nsummary: needs an h100\n"
        "requires: {accelerator: h100}\nsteps:\n  - uses: shell\n    with: {cmd: [echo, hi]}\n")
    facts = tmp_path / "h100.json"
    facts.write_text(json.dumps({"facts": {"accelerator": ["h100"]}}))
    assert engine.plan("test,remote,h100", recipes_dirs=[tmp_path], facts_file=facts)  # plans for that node
    with pytest.raises(StepFailed, match=r"the far side refused the plan: recipe test-remote-h100 requires "
                                         r"accelerator h100; this machine has: ") as caught:
        engine.run_tags("test,remote,h100", recipes_dirs=[tmp_path], facts_file=facts, executor="subprocess")
    assert caught.value.exit_code == 2
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error" and "requires accelerator h100" in document["error"]["message"]
    assert document["provenance"]["facts_file"] == {"path": str(facts.resolve()),
                                                    "sha256": hashlib.sha256(facts.read_bytes()).hexdigest()}


def test_a_far_failure_is_an_error_result(registry: plugins.Registry, tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(FAILING)
    with pytest.raises(StepFailed, match="exited with code 3: broken") as caught:
        engine.run_tags("test,remote,fail", recipes_dirs=[tmp_path], executor="subprocess")
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error"
    assert document["error"]["node"] == "test-remote-fail"


def test_a_job_that_dies_is_an_error_result(registry: plugins.Registry, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(FAILING.replace("test-remote-fail", "test-remote-slow").replace(
        "fail]", "slow]").replace("echo broken >&2; exit 3", "sleep 30"))
    with pytest.raises(StepFailed, match="subprocess job exceeded its time limit without writing") as caught:
        engine.run_tags("test,remote,slow", recipes_dirs=[tmp_path], executor="subprocess",
                   options={"timeout_s": "2"})
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error" and "killed after 2 s" in document["error"]["message"]


def test_settings_are_typed(registry: plugins.Registry) -> None:
    with pytest.raises(UsageError, match=r"subprocess executor option timeout_s='soon': use a number"):
        engine.run_tags("demo,sort", executor="subprocess", options={"timeout_s": "soon"})
    with pytest.raises(UsageError, match=r"unknown option 'timeout'; did you mean 'timeout_s'\?"):
        engine.run_tags("demo,sort", executor="subprocess", options={"timeout": "1"})


def test_the_documented_executor_is_this_one_and_passes_the_kit(registry: plugins.Registry) -> None:
    from cmx_core.testing import executor_problems, executor_run_problems

    docs = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    section = docs.split("## Executors", 1)[1].split("\n## ", 1)[0]
    documented = section.split("```python\n", 1)[1].split("```", 1)[0]
    source = Path(subprocess_executor.__file__).read_text()
    assert documented.strip() == source.split('"""\n\n', 1)[1].strip()
    assert executor_problems(registry, "subprocess-exec") == []
    assert executor_run_problems("subprocess", {"timeout_s": "300"}) == []


def test_the_kit_catches_an_undocumented_or_untyped_setting(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import dataclass, field

    from cmx_core.api import ExecutorSettings, hookimpl
    from cmx_core.testing import executor_problems

    @dataclass(frozen=True)
    class Loose(ExecutorSettings):
        when: object = None  # a type --executor-opt cannot give
        quiet: bool = field(default=False)  # no help

    class Bad:
        @hookimpl
        def cmx_register_executors(self, register: Any) -> None:
            base = subprocess_executor.SubprocessExecutor().executor()
            from dataclasses import replace

            register(replace(base, name="bad", settings=Loose))

    loaded = plugins.load_registry(extra=[("bad-exec", Bad())])
    problems = executor_problems(loaded, "bad-exec")
    assert len(problems) == 3  # and "when" has no help either
    assert any("setting 'quiet' has no help" in p for p in problems)
    assert any("setting 'when' cannot be given on the command line" in p for p in problems)


def test_comparable_drops_only_what_differs_between_two_runs_of_one_plan() -> None:
    base = {"run_id": "a", "created_at": "t1", "timing": {"wall_s": 1.0}, "status": "valid",
            "metrics": {"rate": {"value": 10.0, "unit": "items/s", "higher_is_better": True}},
            "artifacts": [{"kind": "file", "path": "/near/out.txt"}, {"kind": "log", "path": "/near/x.log"}],
            "provenance": {"lock_digest": "d1", "query": {"tags": ["demo"]}}, "cost": {"energy_j": 3.0},
            "outputs": {"sorted": "/near/s"}, "system": {"name": "node-a", "cpu": {"model": "X"}}}
    other = {**base, "run_id": "b", "created_at": "t2", "timing": {"wall_s": 2.0},
             "metrics": {"rate": {"value": 11.0, "unit": "items/s", "higher_is_better": True}},
             "artifacts": [{"kind": "file", "path": "/far/out.txt"}], "provenance": {**base["provenance"],
                                                                                    "lock_digest": "d2"},
             "cost": {"energy_j": 4.0}, "outputs": {"sorted": "/far/s"}, "system": {"name": "node-b",
                                                                                  "cpu": {"model": "X"}}}
    assert comparable(base) == comparable(other)
    retried = {**base, "mlperf": {"result_validity": "VALID", "attempts": [{"number": 1}, {"number": 2}]}}
    assert comparable(retried) == comparable({**base, "mlperf": {"result_validity": "VALID"}})
    assert comparable(retried) != comparable({**base, "mlperf": {"attempts": []}})
    for changed in ({"status": "invalid"}, {"system": {"name": "node-a", "cpu": {"model": "Y"}}},
                    {"metrics": {"rate": {"value": 10.0, "unit": "s", "higher_is_better": False}}},
                    {"provenance": {"lock_digest": "d1", "query": {"tags": ["other"]}}}):
        assert comparable({**base, **changed}) != comparable(base), changed


def test_comparable_across_sweeps_drops_the_sweep_id_and_engine_commit_only() -> None:
    from cmx_core.api import comparable_across_sweeps

    base = {"status": "valid", "provenance": {"sweep": {"id": "sw-1", "index": 0, "point": {"n": "1"}},
                                              "plugins": [{"name": "cmx-core"}, {"name": "test-exec"}]},
            "software": {"engine": {"version": "0.1.0", "git_commit": "abc"}}}
    other = {**base, "provenance": {**base["provenance"], "sweep": {"id": "sw-2", "index": 0, "point": {"n": "1"}},
                                    "plugins": [{"name": "cmx-core"}]},
             "software": {"engine": {"version": "0.1.0", "git_commit": "def"}}}
    assert comparable_across_sweeps(base, ignore_plugins=frozenset({"test-exec"})) == \
        comparable_across_sweeps(other, ignore_plugins=frozenset({"test-exec"}))
    assert comparable_across_sweeps(base) != comparable_across_sweeps(other)  # the plugin lists differ
    moved = {**other, "provenance": {**other["provenance"], "sweep": {"id": "sw-2", "index": 1, "point": {"n": "2"}}}}
    assert comparable_across_sweeps(moved, ignore_plugins=frozenset({"test-exec"})) != \
        comparable_across_sweeps(base, ignore_plugins=frozenset({"test-exec"}))
