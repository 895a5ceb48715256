"""No secret from the host environment reaches an image (history, config, layers) or the
configuration of a container the executor creates. The session fixture puts secret-looking
values into the environment of every build and run (see conftest.SECRETS)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cmx_docker.build import ensure_image
from cmx_docker.engine import sdk_client

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
