"""The ray executor against a real Ray head on 127.0.0.1 (conftest.ray_head): results equal
the local executor's except what differs between any two runs, node facts detected on the
node, typed settings, plan-time refusal of what the cluster lacks, cancellation on timeout."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import comparable
from cmx_core.errors import CmxError, StepFailed, UsageError
from cmx_core.testing.runs import engine
from tests.test_remote_executor import NOOP

# A sleep of its own (the test looks for it by its command line): another run of this suite
# on the same machine has a sleep of another length.
SLEEP_S = f"47.{secrets.randbelow(9000) + 1000}"

H100_FACTS = Path(__file__).resolve().parents[3] / "examples" / "facts" / "h100-sxm-8x.json"

NEEDS_H100 = """\
name: test-ray-h100
tags: [test, ray, h100only]
summary: needs an H100
requires: {accelerator: h100}
steps:
  - uses: shell
    with: {cmd: [echo, hi]}
"""

SLOW = """\
name: test-ray-slow
tags: [test, ray, slow]
summary: sleeps (cancelled by timeout_s)
steps:
  - uses: shell
    with: {cmd: [sleep, "SLEEP_S"]}
""".replace("SLEEP_S", SLEEP_S)


def _opts(address: str, **extra: str) -> dict[str, str]:
    return {"address": address, "env": "CMX_HOME", **extra}


@pytest.mark.parametrize(("tags", "recipe"), [("demo,sort", None), ("detect,os", None),
                                              ("test,remote,noop", NOOP)])
def test_ray_equals_local(cmx_home: Path, ray_head: str, tmp_path: Path, tags: str, recipe: str | None) -> None:
    dirs = []
    if recipe:
        (tmp_path / "r.yaml").write_text(recipe)
        dirs = [tmp_path]
    local = engine.run_tags(tags, recipes_dirs=dirs, executor="local")
    remote = engine.run_tags(tags, recipes_dirs=dirs, executor="ray", options=_opts(ray_head))
    assert comparable(remote.document) == comparable(local.document)
    assert remote.document["status"] in ("valid", "completed")
    far = json.loads((remote.run_dir / "remote" / "result.json").read_text())
    assert far["run_id"] != remote.run_id
    job = json.loads((remote.run_dir / "ray-job.json").read_text())
    assert job["cluster"] == ray_head and job["exit_code"] == 0 and job["node"]["node_id"]
    assert "result.json" in job["files"] and "facts.json" in job["files"]


def test_node_facts_come_from_the_node(cmx_home: Path, ray_head: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the far side is told it is an edge system: the result must say edge."""
    monkeypatch.setenv("CMX_SYSTEM_TYPE", "edge")
    remote = engine.run_tags("demo,sort", executor="ray", options=_opts(ray_head, env="CMX_HOME,CMX_SYSTEM_TYPE"))
    far_facts = json.loads((remote.run_dir / "remote" / "facts.json").read_text())
    assert far_facts["host"]["type"] == "edge" and remote.document["system"]["type"] == "edge"
    monkeypatch.delenv("CMX_SYSTEM_TYPE")
    plain = engine.run_tags("demo,sort", executor="ray", options=_opts(ray_head))
    assert plain.document["system"]["type"] != "edge"


def test_the_conformance_kit(cmx_home: Path, ray_head: str) -> None:
    from cmx_core.testing import executor_problems, executor_run_problems
    from cmx_core.testing.registry import get_registry

    assert executor_problems(get_registry(), "ray") == []
    assert executor_run_problems("ray", _opts(ray_head)) == []


def test_a_plan_needing_what_the_cluster_lacks_is_refused_at_plan_time(cmx_home: Path, ray_head: str,
                                                                       tmp_path: Path) -> None:
    (tmp_path / "h.yaml").write_text(NEEDS_H100)
    with pytest.raises(CmxError, match=r"lacks what the plan needs: 8 GPU \(the cluster has 0\), "
                                       r"accelerator type H100 \(no node has it\)"):
        engine.plan("test,ray,h100only", recipes_dirs=[tmp_path], facts_file=H100_FACTS, executor="ray",
                    options=_opts(ray_head))
    view = engine.plan_view("test,ray,h100only", recipes_dirs=[tmp_path], facts_file=H100_FACTS,
                            executor="ray", options={"num_gpus": "0", "accelerator_type": "none"})
    assert view.to_json()["executor"]["num_gpus"] == 0.0  # no address: described, nothing connected


def test_timeout_cancels_the_task_and_its_processes(cmx_home: Path, ray_head: str, tmp_path: Path,
                                                    mentioning: Callable[[str], list[int]]) -> None:
    (tmp_path / "s.yaml").write_text(SLOW)
    with pytest.raises(StepFailed, match="ray job exceeded its time limit without writing") as caught:
        engine.run_tags("test,ray,slow", recipes_dirs=[tmp_path], executor="ray",
                        options=_opts(ray_head, timeout_s="3"))
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert "cancelled after 3 s" in document["error"]["message"]
    deadline = time.monotonic() + 20
    while mentioning(SLEEP_S) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mentioning(SLEEP_S) == []


def test_a_far_run_directory_over_the_bound_is_an_error(cmx_home: Path, ray_head: str) -> None:
    with pytest.raises(StepFailed, match=r"more than max_result_mb=0.0001; raise max_result_mb"):
        engine.run_tags("demo,sort", executor="ray", options=_opts(ray_head, max_result_mb="0.0001"))


@pytest.mark.parametrize(("options", "message"), [
    ({"num_cpus": "lots"}, r"ray executor option num_cpus='lots': use a number"),
    ({"num_cpus": "0"}, r"ray executor option num_cpus=0: use a number above 0"),
    ({"timeout": "1"}, r"unknown option 'timeout'; did you mean 'timeout_s'\?"),
])
def test_bad_options_are_one_line_usage_errors(cmx_home: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        engine.plan("demo,sort", executor="ray", options=options)
    assert "\n" not in str(caught.value)


def test_a_private_cluster_lives_only_for_its_run(cmx_home: Path, ray_head: str,
                                                  mentioning: Callable[[str], list[int]]) -> None:
    """address empty: a private local Ray is started for the run and gone after it (it
    first drops the session's connection to the test head, which later tests reconnect)."""
    remote = engine.run_tags("demo,sort", executor="ray", options={"env": "CMX_HOME", "cluster_cpus": "1"})
    assert remote.document["status"] == "valid"
    where = json.loads((remote.run_dir / "ray-job.json").read_text())["cluster"]
    temp = where.split("(", 1)[1].rstrip(")")
    assert where.startswith("a private local cluster") and not Path(temp).exists()
    assert mentioning(temp) == []
