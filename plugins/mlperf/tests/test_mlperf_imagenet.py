"""ImageNet validation from a local path (cmx_mlperf.imagenet, recipe get-dataset-imagenet-val):
counted, digested, and refused for a reference run unless it is the verified archive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_mlperf import imagenet, targets


def _images(root: Path, count: int) -> Path:
    for index in range(count):
        folder = root / f"n{index % 2:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"ILSVRC2012_val_{index:08d}.JPEG").write_bytes(bytes([index]) * 16)
    return root


def test_a_directory_is_counted_and_digested_never_reference(tmp_path: Path) -> None:
    found = imagenet.inspect(_images(tmp_path / "val", 5))
    assert found["samples"] == 5 and found["verdict"] == targets.OTHER and found["digest"].startswith("sha256:")
    assert imagenet.inspect(tmp_path / "val")["digest"] == found["digest"]
    (tmp_path / "val" / "n00000000" / "ILSVRC2012_val_00000000.JPEG").write_bytes(b"changed")
    assert imagenet.inspect(tmp_path / "val")["digest"] != found["digest"]


def test_an_archive_named_like_the_reference_with_other_bytes_is_not_verified(tmp_path: Path) -> None:
    images = _images(tmp_path / "val", 3)
    archive = tmp_path / "ILSVRC2012_img_val.tar"
    with tarfile.open(archive, "w") as tar:
        for image in sorted(images.rglob("*.JPEG")):
            tar.add(image, arcname=image.name)
    found = imagenet.inspect(archive)
    assert found["samples"] == 3 and found["verdict"] == targets.NAMED_LIKE and found["digest"].startswith("md5:")
    assert found["digest"] != "md5:29b22e2961454d5413ddabcf34fc5622"


def test_bad_paths_are_one_usage_error(tmp_path: Path) -> None:
    (tmp_path / "x.tar").write_text("not a tar")
    with pytest.raises(UsageError, match="neither a tar archive"):
        imagenet.inspect(tmp_path / "x.tar")
    with pytest.raises(UsageError, match="no images"):
        imagenet.inspect(_empty(tmp_path))
    with pytest.raises(UsageError, match="not a file or a directory"):
        imagenet.inspect(tmp_path / "missing")


def _empty(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _cmx(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "CMX_HOME": str(home)})


def test_the_recipe_counts_and_refuses_a_reference_run(cmx_home: Path, tmp_path: Path) -> None:
    val = _images(tmp_path / "val", 4)
    ok = _cmx(["run", "recipe", "--tags=get,dataset,imagenet-val", f"--path={val}"], cmx_home)
    assert ok.returncode == 0, ok.stderr
    outputs: dict[str, Any] = json.loads(Path(ok.stdout.strip().splitlines()[-1].removeprefix("result: "))
                                         .read_text())["outputs"]
    assert outputs["samples"] == 4 and outputs["verdict"] == targets.OTHER
    refused = _cmx(["run", "recipe", "--tags=get,dataset,imagenet-val", f"--path={val}", "--reference=true"],
                   cmx_home)
    assert refused.returncode == 2 and "refused for a reference run" in refused.stderr


def test_docs_models_md_describes_the_imagenet_recipe() -> None:
    root = Path(__file__).resolve().parents[3]
    doc = (root / "docs" / "models.md").read_text()
    recipe = (root / "plugins/mlperf/src/cmx_mlperf/recipes/get-dataset-imagenet-val.yaml").read_text()
    assert "--tags=get,dataset,imagenet-val" in doc and "imagenet-val]" in recipe
    for output in ("path", "name", "digest", "samples", "verdict"):
        assert f"  {output}: " in recipe and f"`{output}`" in doc
    for suffix in imagenet.IMAGE_SUFFIXES:
        assert f"`{suffix}`" in doc
    assert f"{imagenet.SIZE} images" in doc
