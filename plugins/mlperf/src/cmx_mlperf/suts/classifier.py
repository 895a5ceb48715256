"""The classifier SUT: a torch image classifier with real top-1 accuracy.

``sut_params``:

* ``model``: ``digits-mlp`` (default; trained on scikit-learn's digits at first use and
  cached) or ``resnet50`` (needs ``model_path`` and ``dataset_dir``).
* ``model_path``: ResNet-50 weights (TorchScript or torchvision-style ``state_dict``).
* ``dataset_dir``: ImageNet-style directory (see :mod:`cmx_mlperf.suts.datasets`).
* ``image_size`` (224), ``batch_size`` (digits 256, resnet50 8), ``threads`` (torch intra-op
  threads; default: torch's), ``cache_dir`` (where the digits weights are cached; default
  ``<cmx cache>/mlperf``).

Samples are preprocessed in ``load_samples`` (outside timing, as LoadGen intends); a worker
thread batches issued samples and completes each with its predicted class as int32 bytes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import cache_dir
from cmx_core.errors import UsageError
from cmx_mlperf.sut import AccuracyEntry, Completer
from cmx_mlperf.suts import datasets, models

MODELS = ("digits-mlp", "resnet50")
_STOP = object()


class ClassifierSUT:
    name = "classifier"
    uses_tokens = False

    def __init__(self, model: str, dataset: Any, loader: Any, batch_size: int, threads: int | None) -> None:
        self.model_name = model
        self._dataset = dataset
        self._loader = loader
        self.total_sample_count = len(dataset)
        self.performance_sample_count = len(dataset)
        self._batch_size = batch_size
        self._threads = threads
        self._samples: dict[int, Any] = {}
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self.model_info: dict[str, Any] = {}

    def start(self, completer: Completer) -> None:
        import torch  # deferred: torch only when this runs (953 modules)

        if self._threads:
            torch.set_num_threads(self._threads)
        loaded = self._loader()
        self._module, self.model_info = loaded.module, loaded.info
        self._completer = completer
        self._worker = threading.Thread(target=self._run, name="classifier-sut", daemon=True)
        self._worker.start()

    def load_samples(self, indices: list[int]) -> None:
        for index in indices:
            if index not in self._samples:
                self._samples[index] = self._dataset.load(index)

    def unload_samples(self, indices: list[int]) -> None:
        for index in indices:
            self._samples.pop(index, None)

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        self._queue.put((response_ids, sample_indices))

    def flush(self) -> None:
        return None

    def stop(self) -> None:
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join()
            self._worker = None

    def _run(self) -> None:
        import torch  # deferred: torch only when this runs (953 modules)

        with torch.inference_mode():
            while (item := self._queue.get()) is not _STOP:
                ids, indices = item
                for start in range(0, len(ids), self._batch_size):
                    self._predict(ids[start:start + self._batch_size], indices[start:start + self._batch_size])

    def _predict(self, ids: list[int], indices: list[int]) -> None:
        import numpy as np  # deferred: numpy only when this runs (89 modules)
        import torch  # deferred: torch only when this runs (953 modules)

        batch = torch.from_numpy(np.stack([self._samples[i] for i in indices]))
        predictions = self._module(batch).argmax(dim=1).to(torch.int32).numpy()
        for response_id, label in zip(ids, predictions, strict=True):  # one prediction per sample
            self._completer.complete(response_id, label.tobytes())

    def accuracy(self, entries: list[AccuracyEntry]) -> dict[str, float]:
        """Top-1 over the distinct QSL indices of the accuracy log."""
        import numpy as np  # deferred: numpy only when this runs (89 modules)

        seen: dict[int, int] = {}
        for entry in entries:
            seen[entry.qsl_idx] = int(np.frombuffer(entry.data, dtype=np.int32)[0])
        labels = self._dataset.labels
        correct = sum(1 for idx, pred in seen.items() if labels[idx] == pred)
        return {"top1": correct / len(seen) if seen else 0.0, "samples": float(len(seen))}


def _int(params: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = params.get(key, default)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"classifier SUT: {key}={value!r} must be an integer") from None
    if number < 1:
        raise UsageError(f"classifier SUT: {key}={value!r} must be at least 1")
    return number


def _cache_dir(params: Mapping[str, Any]) -> Path:
    if params.get("cache_dir"):
        return Path(str(params["cache_dir"])).expanduser()

    return cache_dir() / "mlperf"


def make(params: Mapping[str, Any]) -> ClassifierSUT:
    model = str(params.get("model") or "digits-mlp")
    threads = _int(params, "threads", None)
    if model == "digits-mlp":
        cache = _cache_dir(params)
        return ClassifierSUT(model, datasets.DigitsDataset(), lambda: models.load_digits_mlp(cache),
                             _int(params, "batch_size", 256) or 256, threads)
    if model != "resnet50":
        raise UsageError(f"classifier SUT: model {model!r} is not known; use one of: {', '.join(MODELS)}")
    for key in ("model_path", "dataset_dir"):
        if not params.get(key):
            raise UsageError(f"classifier SUT: model resnet50 needs {key}")
    model_path = Path(str(params["model_path"])).expanduser()
    if not model_path.is_file():
        raise UsageError(f"model_path {model_path}: no such file; pass ResNet-50 weights (TorchScript or state_dict)")
    dataset = datasets.ImageFolderDataset(Path(str(params["dataset_dir"])).expanduser(),
                                          _int(params, "image_size", 224) or 224)
    return ClassifierSUT(model, dataset, lambda: models.load_resnet50(model_path),
                         _int(params, "batch_size", 8) or 8, threads)
