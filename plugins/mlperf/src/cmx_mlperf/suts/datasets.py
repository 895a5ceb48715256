"""Datasets for the classifier SUT.

* :class:`DigitsDataset`: scikit-learn's bundled ``load_digits`` (no download), split with a
  fixed seed; the held-out part is what LoadGen's QSL serves.
* :class:`ImageFolderDataset`: an ImageNet-style directory, either class folders
  (``DIR/<class>/*.JPEG``, labels = sorted class names) or files listed with their label in
  ``DIR/val_map.txt`` (``name label`` per line, MLPerf's ImageNet layout). Images may be
  JPEG/PNG (decoded with Pillow: resize 256, centre crop 224, ImageNet mean/std) or ``.npy``
  arrays already preprocessed to CHW float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png", ".npy")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
DIGITS_SPLIT_SEED = 0
DIGITS_TEST_FRACTION = 0.33


@dataclass(frozen=True)
class DigitsSplit:
    x_train: Any
    y_train: Any
    x_test: Any
    y_test: Any


def digits_split() -> DigitsSplit:
    """load_digits scaled to [0, 1], split 67/33 with a fixed seed."""
    import numpy as np  # deferred: numpy only when this runs (100 modules)
    from sklearn.datasets import load_digits  # deferred: sklearn only when this runs (1493 modules)

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(y))
    n_test = int(len(y) * DIGITS_TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return DigitsSplit(x[train], y[train], x[test], y[test])


class DigitsDataset:
    name = "sklearn-digits"

    def __init__(self) -> None:
        split = digits_split()
        self._x, self.labels = split.x_test, split.y_test.tolist()

    def __len__(self) -> int:
        return len(self.labels)

    def load(self, index: int) -> Any:
        return self._x[index]


class ImageFolderDataset:
    name = "imagenet-style"

    def __init__(self, root: Path, image_size: int = 224) -> None:
        if not root.is_dir():
            raise UsageError(f"dataset_dir {root}: not a directory; "
                             "pass an ImageNet-style folder (class subfolders or val_map.txt)")
        self.root, self.image_size = root, image_size
        self.files, self.labels = _listing(root)
        if not self.files:
            raise UsageError(f"dataset_dir {root}: no images ({', '.join(IMAGE_SUFFIXES)}) found")

    def __len__(self) -> int:
        return len(self.files)

    def load(self, index: int) -> Any:
        path = self.files[index]
        try:
            if path.suffix.lower() == ".npy":
                import numpy as np  # deferred: optional numpy, only when this runs

                return np.load(path).astype("float32")
            return preprocess_image(path, self.image_size)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: cannot read image ({exc})") from None


def _listing(root: Path) -> tuple[list[Path], list[int]]:
    val_map = root / "val_map.txt"
    if val_map.is_file():
        return _from_val_map(val_map)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files: list[Path] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        for path in sorted((root / name).iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                files.append(path)
                labels.append(label)
    return files, labels


def _from_val_map(val_map: Path) -> tuple[list[Path], list[int]]:
    files: list[Path] = []
    labels: list[int] = []
    for number, line in enumerate(val_map.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise UsageError(f"{val_map}:{number}: expected 'FILE LABEL', got {line.strip()!r}")
        path = val_map.parent / parts[0]
        if not path.is_file():
            raise UsageError(f"{val_map}:{number}: image {parts[0]} does not exist")
        files.append(path)
        labels.append(int(parts[1]))
    return files, labels


def preprocess_image(path: Path, size: int = 224) -> Any:
    """Resize the short side to size*256/224, centre crop ``size``, normalise, CHW float32."""
    import numpy as np  # deferred: numpy only when this runs (100 modules)
    try:
        from PIL import Image  # deferred: optional PIL, only when this runs
    except ImportError:
        raise UsageError(
            "decoding JPEG/PNG images needs Pillow: pip install 'cmx-mlperf[vision]' (or give .npy files)"
        ) from None
    with Image.open(path) as opened:
        image = opened.convert("RGB")
        short = round(size * 256 / 224)
        w, h = image.size
        scale = short / min(w, h)
        image = image.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.Resampling.BILINEAR)
        w, h = image.size
        left, top = (w - size) // 2, (h - size) // 2
        image = image.crop((left, top, left + size, top + size))
        array = np.asarray(image, dtype=np.float32) / 255.0
    normalised = (array - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return np.ascontiguousarray(normalised.transpose(2, 0, 1))
