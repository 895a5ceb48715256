"""The client path: the real ``kubernetes`` client, through a kubeconfig, against the
STAND-IN API server (standin.py; no real cluster can run here), whose kubelet runs the
pod's command locally. The demo chain's result equals the local executor's, comes back
framed in the pod log, and the Job and ConfigMap are deleted afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import standin

from cmx_core.api import comparable
from cmx_core.errors import StepFailed, UsageError
from cmx_core.testing.runs import engine
from tests.test_remote_executor import NOOP


def _opts(kubeconfig: Path, **extra: str) -> dict[str, str]:
    return {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
            "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", **extra}


@pytest.mark.parametrize(("tags", "recipe"), [("demo,sort", None), ("test,remote,noop", NOOP)])
def test_a_job_through_the_client_equals_local(cmx_home: Path, tmp_path: Path,
                                               cluster: tuple[Path, standin.StandIn], tags: str,
                                               recipe: str | None) -> None:
    kubeconfig, state = cluster
    dirs = []
    if recipe:
        (tmp_path / "r.yaml").write_text(recipe)
        dirs = [tmp_path]
    local = engine.run_tags(tags, recipes_dirs=dirs, executor="local")
    remote = engine.run_tags(tags, recipes_dirs=dirs, executor="k8s", options=_opts(kubeconfig))
    assert comparable(remote.document) == comparable(local.document)
    assert (remote.run_dir / "remote" / "result.json").is_file()
    assert "=== cmx-k8s result v1 end ===" in (remote.run_dir / "pod.log").read_text()
    assert ("POST", "/apis/batch/v1/namespaces/default/jobs") in state.calls
    assert ("POST", "/api/v1/namespaces/default/configmaps") in state.calls
    assert state.objects.keys() == {("default", "persistentvolumeclaims", "cmx-cache")}  # Job, ConfigMap deleted
    assert state.pods == {}


def test_the_conformance_kit(cmx_home: Path, cluster: tuple[Path, standin.StandIn]) -> None:
    from cmx_core.testing import executor_problems, executor_run_problems
    from cmx_core.testing.registry import get_registry

    assert executor_problems(get_registry(), "k8s") == []
    assert executor_run_problems("k8s", _opts(cluster[0])) == []


def test_a_failing_pod_is_an_error_result(cmx_home: Path, tmp_path: Path,
                                          cluster: tuple[Path, standin.StandIn]) -> None:
    (tmp_path / "f.yaml").write_text("""\
name: test-k8s-fail
tags: [test, k8s, fail]
summary: fails on the far side
steps:
  - uses: shell
    with: {cmd: [sh, -c, "echo broken >&2; exit 3"]}
""")
    with pytest.raises(StepFailed, match="exited with code 3: broken"):
        engine.run_tags("test,k8s,fail", recipes_dirs=[tmp_path], executor="k8s", options=_opts(cluster[0]))


def test_no_cluster_is_a_usage_error(cmx_home: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"k8s executor option kubeconfig='.*absent': no such file"):
        engine.run_tags("demo,sort", executor="k8s", options=_opts(tmp_path / "absent"))
    empty = tmp_path / "empty-kubeconfig"
    empty.write_text("{}")
    with pytest.raises(StepFailed, match=r"no cluster configured .*give kubeconfig=FILE"):
        engine.run_tags("demo,sort", executor="k8s", options=_opts(empty))
