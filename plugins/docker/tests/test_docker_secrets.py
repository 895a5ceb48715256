"""No secret from the host environment reaches an image (history, config, layers) or the
configuration of a container the executor creates. The session fixture puts secret-looking
values into the environment of every build and run (see conftest.SECRETS)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cmx_docker.build import ensure_image
from cmx_docker.digests import DigestMemo, tree_files
from cmx_docker.engine import sdk_client
from cmx_docker.errors import ContextError

NAMES = ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "CMX_TEST_API_KEY")


def _secrets() -> list[bytes]:
    values = [os.environ[name].encode() for name in NAMES]
    assert all(len(v) > 16 for v in values)  # the fixture set them
    return values


def _leaks(text: str) -> list[str]:
    return [v.decode() for v in _secrets() if v.decode() in text]


def test_image_history_config_and_layers_hold_no_secret(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    record = ensure_image("python", endpoint=engine)
    client = sdk_client(engine)
    try:
        history = client.api.history(record.tag)
        inspect = client.api.inspect_image(record.tag)
        assert history and all("CreatedBy" in h for h in history)
        assert _leaks(json.dumps(history)) == []
        assert _leaks(json.dumps(inspect)) == []
        env = "\n".join(inspect["Config"].get("Env") or [])
        assert not any(name in env for name in NAMES)
        assert inspect["Config"]["User"] == "1000:1000"
        assert _scan_saved_image(client.images.get(record.tag)) == []
    finally:
        client.close()


def _scan_saved_image(image: Any) -> list[str]:
    """Stream ``docker save`` and look for every secret value in the raw layer bytes."""
    secrets = _secrets()
    keep = max(len(s) for s in secrets)
    tail = b""
    found: set[str] = set()
    for chunk in image.save(chunk_size=1 << 20):
        window = tail + chunk
        found.update(s.decode() for s in secrets if s in window)
        tail = window[-keep:]
    return sorted(found)


def test_executor_container_config_holds_no_secret(engine, base_image, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import plan
    from cmx_core.testing import execution_request
    from cmx_docker.executor import DockerExecutor, container_plan
    from cmx_docker.settings import DockerSettings

    record = ensure_image("python", endpoint=engine)
    job = DockerExecutor().prepare(execution_request(plan("detect,os"), tmp_path / "run", settings=DockerSettings()))
    kwargs = container_plan(job, record, DockerSettings()).options.sdk_kwargs()
    kwargs.pop("detach")
    client = sdk_client(engine)
    container = client.containers.create(**kwargs)
    try:
        config = client.api.inspect_container(container.id)
        assert _leaks(json.dumps(config)) == []
        env = config["Config"]["Env"]
        assert not any(e.split("=", 1)[0] in NAMES for e in env)
        assert config["HostConfig"]["NetworkMode"] == "none"
        assert not config["HostConfig"].get("Privileged")
    finally:
        container.remove(force=True)
        client.close()


PLANTED = "cmx-planted-secret-7f3a9c2e51d84b06"
"""What a user's stray credentials file holds; it must reach no wheel, context or layer."""


def _clone_with_planted_secrets(tmp_path: Path) -> Path:
    """A git clone of this checkout (its committed files) with untracked secret files planted
    where a build would copy whole directories: beside cmx-core's modules and recipes, inside
    a plugin package, in the container templates."""
    import subprocess

    from cmx_docker.sources import checkout_root

    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(checkout_root()), str(clone)], check=True,
                   timeout=300)
    for planted in ("cmx_core/.aws_credentials", "recipes/secret.yaml", "plugins/detect/src/cmx_detect/token.txt",
                    "containers/python/.env"):
        (clone / planted).write_text(f"k={PLANTED}\n", encoding="utf-8")
    return clone


def test_untracked_files_are_not_part_of_any_package(tmp_path: Path, monkeypatch: Any) -> None:
    from cmx_docker.sources import local_packages

    clone = _clone_with_planted_secrets(tmp_path)
    monkeypatch.setenv("CMX_SOURCE_DIR", str(clone))
    for pkg in local_packages(("detect", "docker", "mlperf"), DigestMemo(None)):
        files = tree_files(pkg.source.resolve(), pkg.include)
        assert files, pkg.dist
        assert not [f for f in files if PLANTED in f.read_text(errors="replace")], pkg.dist
    assert (clone / "cmx_core" / ".aws_credentials").is_file()  # planted, and left out


def test_a_planted_secret_reaches_no_layer_of_the_image(engine, base_image, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                        monkeypatch: Any) -> None:
    clone = _clone_with_planted_secrets(tmp_path)
    monkeypatch.setenv("CMX_SOURCE_DIR", str(clone))
    record = ensure_image("python", endpoint=engine, plugins=("detect",))
    client = sdk_client(engine)
    try:
        image = client.images.get(record.tag)
        keep = len(PLANTED)
        tail, found = b"", False
        for chunk in image.save(chunk_size=1 << 20):
            window = tail + chunk
            found = found or PLANTED.encode() in window
            tail = window[-keep:]
        assert not found
    finally:
        client.close()


def test_a_directory_that_is_no_git_checkout_is_refused_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    with pytest.raises(ContextError, match=r"not a git checkout .*clone the repository, or set CMX_SOURCE_DIR"):
        tree_files(tmp_path, ("pkg",))
