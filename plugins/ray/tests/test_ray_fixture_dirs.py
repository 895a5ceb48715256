"""The test clusters' own directories (#52): a cluster's temp dir is its RAY_TMPDIR and its
tasks' TMPDIR, so no test needs or touches the machine's /tmp/ray, and it is short enough for
Ray's unix sockets (AF_UNIX's 107 bytes) even under a deep private TMPDIR."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from cmx_ray.cluster import RAY_ENV

from .multinode import AF_UNIX_MAX, RAY_SOCKET_TAIL, cluster_env, ray_temp_dir

README = Path(__file__).resolve().parents[1] / "README.md"


def test_a_cluster_keeps_rays_defaults_and_its_tasks_files_in_its_temp_dir() -> None:
    env = cluster_env("/tmp/cmx-ray-nodes-x")
    assert env["RAY_TMPDIR"] == env["TMPDIR"] == "/tmp/cmx-ray-nodes-x"
    assert {k: env[k] for k in RAY_ENV} == RAY_ENV
    words = " ".join(README.read_text().split())
    assert "its `RAY_TMPDIR` and its tasks' `TMPDIR`" in words and "`/tmp/ray`" in words


@pytest.mark.parametrize("depth", [0, 60])
def test_the_temp_dir_is_under_tmpdir_where_rays_sockets_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             depth: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))                  # a short TMPDIR
    deep = base / ("d" * depth) if depth else base
    deep.mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    try:
        made = Path(ray_temp_dir("cmx-ray-nodes-"))
        assert made.is_dir() and made.name.startswith("cmx-ray-nodes-")
        assert made.parent == (deep if depth == 0 else Path("/tmp"))       # too deep: /tmp instead
        assert len(str(made)) + RAY_SOCKET_TAIL <= AF_UNIX_MAX
        os.rmdir(made)
    finally:
        if depth:
            deep.rmdir()
        base.rmdir()
