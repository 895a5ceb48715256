"""Verified, reproducible tags and declared-only contexts, against the real engine."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cmx_docker.base import LOCAL_BASE, ROOTFS_LABEL, ensure_base
from cmx_docker.build import ensure_image
from cmx_docker.context import CA_DEST, ca_bundle, image_spec
from cmx_docker.digests import DigestMemo
from cmx_docker.engine import inspect_image, sdk_client
from cmx_docker.errors import ContextError, ImageUnavailable

TINY = "base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\nbuild_network: false\n"


def test_a_retagged_image_is_refused(engine, base_image, make_template) -> None:  # type: ignore[no-untyped-def]
    token = uuid.uuid4().hex
    make_template("retag", "FROM {{ base }}\nCOPY data.txt /data.txt\n", TINY + "context: [data.txt]\n",
                  {"data.txt": token})
    tag = image_spec("retag", engine, DigestMemo(None)).tag
    repository, version = tag.split(":")
    client = sdk_client(engine)
    try:
        client.api.tag(LOCAL_BASE, repository, version)  # another image under the expected tag
        with pytest.raises(ImageUnavailable, match=rf"image {tag} .* has org.cmx.content-digest=none, not "
                                                   r".*it was retagged or built outside cmx.*docker rmi"):
            ensure_image("retag", endpoint=engine)
        client.api.remove_image(tag)
        built = ensure_image("retag", endpoint=engine)  # removed: the real one is built and then trusted
        assert built.built and not ensure_image("retag", endpoint=engine).built
    finally:
        client.close()


def test_two_imports_of_the_same_base_give_the_same_tags(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    tarball_dir = Path(base_image.tarball.parent) if base_image.tarball else Path(
        os.environ.get("CMX_TEST_CACHE") or Path(os.environ["CMX_HOME"]) / "rootfs")
    first = ensure_base(engine, tarball_dir, force=True)
    python_tag = image_spec("python", engine, DigestMemo(None)).tag
    second = ensure_base(engine, tarball_dir, force=True)
    assert first.rootfs_digest == second.rootfs_digest and first.content_tag == second.content_tag
    assert first.content_tag and inspect_image(engine, first.content_tag) is not None
    labels = inspect_image(engine, LOCAL_BASE)["Config"]["Labels"]  # type: ignore[index]
    assert labels[ROOTFS_LABEL] == second.rootfs_digest
    assert image_spec("python", engine, DigestMemo(None)).tag == python_tag  # no import changes a template's tag


RACE_REF = "cmx-test-race:bookworm-minbase"


def test_three_imports_at_once_end_on_one_image(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    """Two cmx runs on a fresh engine (or two test workers) import the base at the same time:
    every one of them goes on with the image the name finally names (CI saw a template built
    on one import while the caller held the id of another)."""
    tarball_dir = Path(base_image.tarball.parent) if base_image.tarball else Path(
        os.environ.get("CMX_TEST_CACHE") or Path(os.environ["CMX_HOME"]) / "rootfs")
    assert inspect_image(engine, RACE_REF) is None
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            imported = list(pool.map(lambda _: ensure_base(engine, tarball_dir, ref=RACE_REF), range(3)))
        named = inspect_image(engine, RACE_REF)
        assert named is not None
        assert {base.image_id for base in imported} == {named["Id"]}
    finally:
        client = sdk_client(engine)
        try:
            if inspect_image(engine, RACE_REF) is not None:
                client.api.remove_image(RACE_REF, noprune=True)
        finally:
            client.close()


def test_a_secret_in_the_context_is_refused_before_anything_is_built(engine, base_image,  # type: ignore[no-untyped-def]
                                                                    make_template) -> None:
    make_template("leaky", "FROM {{ base }}\nCOPY conf.ini /conf.ini\n", TINY + "context: [conf.ini]\n",
                  {"conf.ini": f"token={os.environ['HF_TOKEN']}\nrun={uuid.uuid4().hex}\n"})
    tag = image_spec("leaky", engine, DigestMemo(None)).tag
    with pytest.raises(ContextError) as err:
        ensure_image("leaky", endpoint=engine)
    message = str(err.value)
    assert "build context file conf.ini holds the value of $HF_TOKEN" in message
    assert os.environ["HF_TOKEN"] not in message and "\n" not in message
    assert inspect_image(engine, tag) is None


def test_only_the_declared_files_reach_the_build(engine, base_image, make_template) -> None:  # type: ignore[no-untyped-def]
    make_template("declared", "FROM {{ base }}\nCOPY . /ctx/\n", TINY + "context: [data.txt]\n",
                  {"data.txt": uuid.uuid4().hex, "undeclared.txt": "not in the context"})
    record = ensure_image("declared", endpoint=engine)
    client = sdk_client(engine)
    try:
        out = client.containers.run(record.tag, ["find", "/ctx", "-type", "f"], remove=True, network_mode="none")
    finally:
        client.close()
    expected = ["/ctx/Dockerfile", "/ctx/data.txt", "/ctx/requirements.lock"]
    if ca_bundle() is not None:  # the host's CA bundle is a declared context file
        expected.append(f"/ctx/{CA_DEST}")
    assert sorted(out.decode().split()) == sorted(expected)  # undeclared.txt, .dockerignore: not sent


def test_cache_prune_images_removes_only_unreferenced_cmx_images(engine, base_image, make_template) -> None:  # type: ignore[no-untyped-def]
    from cmx_docker.prune import prune_images

    make_template("prunable", "FROM {{ base }}\nCOPY data.txt /data.txt\n", TINY + "context: [data.txt]\n",
                  {"data.txt": uuid.uuid4().hex})
    record = ensure_image("prunable", endpoint=engine)
    client = sdk_client(engine)
    try:  # every other image (by tag, or by id when a rebuild left it untagged) counts as referenced
        others = frozenset(name for image in client.images.list() if record.tag not in image.tags
                           for name in (*image.tags, image.id))
    finally:
        client.close()
    assert prune_images(others | {record.tag}, dry_run=False) == []
    assert prune_images(others, dry_run=True) == [f"image {record.tag}"]
    assert inspect_image(engine, record.tag) is not None  # a dry run removes nothing
    assert prune_images(others, dry_run=False) == [f"image {record.tag}"]
    assert inspect_image(engine, record.tag) is None
    assert inspect_image(engine, LOCAL_BASE) is not None  # the base carries no content label: kept
