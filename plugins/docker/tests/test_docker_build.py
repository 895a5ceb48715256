"""Real builds with a real engine: cache hits, rebuilds, failing builds, offline bases."""

from __future__ import annotations

import json
import uuid

import pytest

from cmx_docker.build import docker_cache, ensure_image
from cmx_docker.engine import inspect_image, sdk_client
from cmx_docker.errors import BuildFailed, ImageUnavailable

TINY = "base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\nbuild_network: false\n"


def _run(engine, image: str, *cmd: str) -> str:  # type: ignore[no-untyped-def]
    client = sdk_client(engine)
    try:
        out = client.containers.run(image, list(cmd), remove=True, network_mode="none")
    finally:
        client.close()
    return out.decode()


def test_python_template_builds_then_hits_the_cache(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    first = ensure_image("python", endpoint=engine)
    second = ensure_image("python", endpoint=engine)
    if first.built:  # a warm engine may already hold the image from an earlier session
        assert first.build_s > 0
    assert not second.built and second.build_s == 0.0
    assert second.tag == first.tag and second.image_id == first.image_id
    assert first.tag.startswith("cmx-python:") and first.image_id.startswith("sha256:")
    assert first.base_id == base_image.image_id
    doc = inspect_image(engine, first.tag)
    assert doc["Config"]["User"] == "1000:1000"
    assert doc["Config"]["Labels"]["org.cmx.content-digest"] == first.content_digest
    record = docker_cache() / "images" / f"{first.tag.replace(':', '-')}.json"
    if first.built:
        assert json.loads(record.read_text())["image_id"] == first.image_id
    out = _run(engine, first.tag, "cmx", "--version")
    assert out.startswith("cmx 0.1.0")
    freeze = _run(engine, first.tag, "cat", "/opt/cmx/freeze.txt")
    assert "cmx-core==0.1.0" in freeze and "pluggy==" in freeze


def test_changing_one_context_file_rebuilds(engine, base_image, make_template) -> None:  # type: ignore[no-untyped-def]
    token = uuid.uuid4().hex  # content no earlier session built
    folder = make_template("ctxfile", "FROM {{ base }}\nCOPY data.txt /data.txt\n",
                           TINY + "context: [data.txt]\n", {"data.txt": f"first {token}\n"})
    one = ensure_image("ctxfile", endpoint=engine)
    again = ensure_image("ctxfile", endpoint=engine)
    assert one.built and not again.built and again.image_id == one.image_id
    (folder / "data.txt").write_text(f"second {token}\n")
    two = ensure_image("ctxfile", endpoint=engine)
    assert two.built and two.tag != one.tag and two.image_id != one.image_id
    assert _run(engine, two.tag, "cat", "/data.txt") == f"second {token}\n"
    assert _run(engine, one.tag, "cat", "/data.txt") == f"first {token}\n"


def test_failing_run_step_shows_the_last_log_lines(engine, base_image, make_template) -> None:  # type: ignore[no-untyped-def]
    make_template("failing", "FROM {{ base }}\nRUN echo about-to-fail-7f3a && false\n", TINY)
    with pytest.raises(BuildFailed) as err:
        ensure_image("failing", endpoint=engine)
    message = str(err.value)
    assert "build of cmx-failing:" in message and "Step 2/" in message
    assert "about-to-fail-7f3a" in message and "returned a non-zero code: 1" in message
    assert "\n" not in message and err.value.exit_code == 1


def test_base_that_cannot_be_pulled_offline(engine, make_template) -> None:  # type: ignore[no-untyped-def]
    make_template("offline", "FROM {{ base }}\n",
                  "base: {registry: 'cmx-test-nowhere/absent:1.0'}\ninstall_cmx: false\n")
    with pytest.raises(ImageUnavailable) as err:
        ensure_image("offline", endpoint=engine)
    message = str(err.value)
    assert "cannot pull base image cmx-test-nowhere/absent:1.0" in message
    assert "--tags=debootstrap,base-image" in message


def test_missing_local_base_without_registry_suggests_debootstrap(engine, make_template) -> None:  # type: ignore[no-untyped-def]
    make_template("nolocal", "FROM {{ base }}\n", "base: {local: 'cmx-base:never-built'}\ninstall_cmx: false\n")
    with pytest.raises(ImageUnavailable, match=r"cmx-base:never-built is not in docker.*debootstrap,base-image"):
        ensure_image("nolocal", endpoint=engine)


def test_build_image_recipe_outputs(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import run

    result = run("build,image,python")
    outputs = result.document["outputs"]
    assert outputs["image"].startswith("cmx-python:") and outputs["image_id"].startswith("sha256:")
    assert outputs["digest"] == outputs["image_id"] and outputs["runtime"].startswith(engine.kind)
    again = run("build,image,python").document["outputs"]
    assert again["built"] is False and again["image_id"] == outputs["image_id"]
