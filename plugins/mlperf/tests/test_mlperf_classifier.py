"""The classifier SUT: the digits MLP (trained and cached at first use) and ResNet-50 from
user weights over a small generated ImageNet-style directory, through real LoadGen runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from cmx_core.errors import UsageError  # noqa: E402
from cmx_mlperf.harness.step import run_step  # noqa: E402
from cmx_mlperf.suts import classifier, datasets, models  # noqa: E402
from cmx_mlperf.suts.resnet import resnet50  # noqa: E402

IMAGE_SIZE = 64
CLASSES = ("n01440764", "n01443537", "n01484850")


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three class folders with two random PNG images each (sizes vary: resize + crop)."""
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("imagenet") / "val"
    rng = np.random.default_rng(7)
    for c, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for i in range(2):
            pixels = rng.integers(0, 255, size=(50 + 10 * i, 70, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"ILSVRC2012_val_{c}{i}.PNG")
    return root


@pytest.fixture(scope="module")
def resnet_weights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    torch.manual_seed(3)
    model = resnet50(num_classes=len(CLASSES)).eval()
    path = tmp_path_factory.mktemp("weights") / "resnet50.pth"
    torch.save(model.state_dict(), path)
    return path, model


def _expected_top1(model: Any, root: Path) -> float:
    data = datasets.ImageFolderDataset(root, IMAGE_SIZE)
    import numpy as np

    with torch.inference_mode():
        batch = torch.from_numpy(np.stack([data.load(i) for i in range(len(data))]))
        predictions = model(batch).argmax(dim=1).tolist()
    return sum(p == y for p, y in zip(predictions, data.labels, strict=True)) / len(data)


def test_digits_accuracy_run_reports_real_top1(cmx_home: Path, cmx_step_context: Any) -> None:
    out = run_step(cmx_step_context(params={
        "sut": "classifier", "scenario": "Offline", "mode": "AccuracyOnly",
        "sut_params": {"model": "digits-mlp"}}))
    part = out.result
    assert part.status == "valid", part.invalid_reasons
    assert part.benchmark["primary_metric"] == "accuracy_top1"
    assert part.metrics["accuracy_top1"].value > 0.9
    assert part.metrics["accuracy_samples"].value == len(datasets.digits_split().y_test)
    assert part.sections["model"]["name"] == "digits-mlp"
    assert part.sections["software"]["framework"] == "pytorch"
    assert (cmx_home / "cache" / "mlperf" / models.DIGITS_FILE).is_file()


def test_digits_training_is_deterministic_and_cached(tmp_path: Path) -> None:
    first = models.load_digits_mlp(tmp_path / "a")
    second = models.load_digits_mlp(tmp_path / "b")
    assert first.info["sha256"] == second.info["sha256"]
    cached = tmp_path / "a" / models.DIGITS_FILE
    stamp = cached.stat().st_mtime_ns
    assert models.load_digits_mlp(tmp_path / "a").info["sha256"] == first.info["sha256"]
    assert cached.stat().st_mtime_ns == stamp  # loaded, not retrained


def test_resnet50_state_dict_accuracy_matches_direct_inference(
    cmx_home: Path, cmx_step_context: Any, imagenet_dir: Path, resnet_weights: tuple[Path, Any]
) -> None:
    path, model = resnet_weights
    out = run_step(cmx_step_context(params={
        "sut": "classifier", "scenario": "Offline", "mode": "AccuracyOnly",
        "sut_params": {"model": "resnet50", "model_path": str(path), "dataset_dir": str(imagenet_dir),
                       "image_size": IMAGE_SIZE, "batch_size": 4}}))
    part = out.result
    assert part.metrics["accuracy_top1"].value == pytest.approx(_expected_top1(model, imagenet_dir))
    assert part.metrics["accuracy_samples"].value == 6
    assert part.sections["model"]["architecture"] == "resnet50"
    # random weights miss the resnet50 accuracy target: an invalid accuracy run, with the reason
    assert part.status == "invalid"
    assert any("below the target" in r for r in part.invalid_reasons)


def test_resnet50_torchscript_performance_run(
    cmx_home: Path, cmx_step_context: Any, imagenet_dir: Path, resnet_weights: tuple[Path, Any], tmp_path: Path
) -> None:
    _, model = resnet_weights
    scripted = tmp_path / "resnet50.ts"
    torch.jit.save(torch.jit.trace(model, torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE)), str(scripted))
    out = run_step(cmx_step_context(params={
        "sut": "classifier", "scenario": "Offline", "duration_s": 0.5, "min_query_count": 6,
        "sut_params": {"model": "resnet50", "model_path": str(scripted), "dataset_dir": str(imagenet_dir),
                       "image_size": IMAGE_SIZE}}))
    part = out.result
    assert part.status == "valid", part.invalid_reasons
    assert part.metrics["samples_per_second"].value > 0
    assert part.sections["model"]["architecture"] == "torchscript"


def test_val_map_layout(tmp_path: Path) -> None:
    import numpy as np

    for i in range(3):
        np.save(tmp_path / f"img{i}.npy", np.zeros((3, 8, 8), dtype=np.float32))
    (tmp_path / "val_map.txt").write_text("img0.npy 5\nimg1.npy 7\n\nimg2.npy 5\n")
    data = datasets.ImageFolderDataset(tmp_path)
    assert data.labels == [5, 7, 5] and data.load(1).shape == (3, 8, 8)
    (tmp_path / "val_map.txt").write_text("img0.npy five\n")
    with pytest.raises(UsageError, match=r"val_map.txt:1: expected 'FILE LABEL'"):
        datasets.ImageFolderDataset(tmp_path)


def test_missing_dataset_dir_is_one_line(tmp_path: Path, resnet_weights: tuple[Path, Any]) -> None:
    with pytest.raises(UsageError) as err:
        classifier.make({"model": "resnet50", "model_path": str(resnet_weights[0]),
                         "dataset_dir": str(tmp_path / "nope")})
    assert "dataset_dir" in str(err.value) and "not a directory" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("content", "words"), [
    (b"these are not weights", "not a readable torch weights file"),
    (None, "not ResNet-50 weights"),
])
def test_bad_weights_are_one_line(tmp_path: Path, content: bytes | None, words: str) -> None:
    path = tmp_path / "weights.pth"
    if content is None:
        torch.save(models._mlp().state_dict(), path)  # a real weights file, wrong architecture
    else:
        path.write_bytes(content)
    with pytest.raises(UsageError) as err:
        models.load_resnet50(path)
    assert words in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_bad_weights_through_the_step(
    cmx_home: Path, cmx_step_context: Any, tmp_path: Path, imagenet_dir: Path
) -> None:
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(UsageError) as err:
        run_step(cmx_step_context(params={
            "sut": "classifier", "scenario": "Offline",
            "sut_params": {"model": "resnet50", "model_path": str(bad), "dataset_dir": str(imagenet_dir)}}))
    assert "model_path" in str(err.value) and "\n" not in str(err.value)


def test_unknown_model_and_missing_inputs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="model 'vgg' is not known"):
        classifier.make({"model": "vgg"})
    with pytest.raises(UsageError, match="needs model_path"):
        classifier.make({"model": "resnet50", "dataset_dir": str(tmp_path)})
    with pytest.raises(UsageError, match="no such file"):
        classifier.make({"model": "resnet50", "model_path": str(tmp_path / "x.pth"), "dataset_dir": str(tmp_path)})
