"""CNN/DailyMail from a local file (the MLPerf llama3.1-8b ``cnn_eval.json``), verified.

The file is a JSON list of samples, each with ``input`` (the article, or the prompt) and
``output`` (the reference summary); ``instruction`` and ``tok_input`` may be there too and are
not needed. Nothing is downloaded. The file's sha256 is its identity: it is ``reference``
only when the digest is a known digest of the reference dataset
(``cmx_mlperf.targets.BENCHMARKS[...].dataset_digests``, docs/models.md); a file named
``cnn_eval.json`` is otherwise "named like the reference, not verified". A reference run
(``reference: true``) refuses any other file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_mlperf import targets
from cmx_mlperf.llm import describe
from cmx_mlperf.llm.dataset import SAMPLES, Sample
from cmx_mlperf.llm.errors import UsageError

BENCHMARK = "llama3_1-8b"
REFERENCE_FILE = "cnn_eval.json"


@dataclass(frozen=True)
class LocalDataset:
    path: str
    name: str
    sha256: str
    samples: tuple[Sample, ...]

    def info(self) -> dict[str, Any]:
        """What a SUT reports as ``dataset_info`` (the result's identity reads it)."""
        return {"name": self.name, "path": self.path, "sha256": self.sha256, "samples": len(self.samples),
                "source": "local file"}


def load(path: str | Path) -> LocalDataset:
    """The samples of ``path``; a file that is not such a list is one UsageError."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"dataset {file}: not a file; give the path of cnn_eval.json")
    raw = file.read_bytes()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"dataset {file}: not JSON ({exc})") from None
    if not isinstance(data, list) or not data:
        raise UsageError(f"dataset {file}: expected a non-empty JSON list of {{input, output}} samples")
    samples = []
    for index, item in enumerate(data):
        if not (isinstance(item, dict) and isinstance(item.get("input"), str) and isinstance(item.get("output"), str)):
            raise UsageError(f"dataset {file}: sample {index} has no string 'input' and 'output'")
        samples.append(Sample(item["input"], item["output"]))
    named = targets.BENCHMARKS[BENCHMARK].dataset if file.name == REFERENCE_FILE else f"local {file.name}"
    return LocalDataset(str(file.resolve()), named, hashlib.sha256(raw).hexdigest(), tuple(samples))


def verify(dataset: LocalDataset, reference: bool) -> dict[str, Any]:
    """The dataset's identity; for a reference run anything but ``reference`` is refused."""
    identity = targets.dataset_identity(BENCHMARK, dataset.info())
    if reference and identity["verdict"] != targets.REFERENCE:
        raise UsageError(f"dataset {dataset.path}: refused for a reference run: sha256 {dataset.sha256} is not a "
                         f"known digest of {targets.BENCHMARKS[BENCHMARK].dataset} ({identity['verdict']}; "
                         "docs/models.md)")
    return identity


def samples_and_info(path: str | None) -> tuple[tuple[Sample, ...], dict[str, Any]]:
    """A SUT's samples and ``dataset_info``: the local file at ``path``, else the built-in set."""
    if not path:
        return tuple(SAMPLES), describe.dataset_info()
    dataset = load(path)
    return dataset.samples, dataset.info()


def get_step(ctx: Any) -> dict[str, Any]:
    """Entry point of the ``get-dataset-cnn-dailymail`` recipe (built-in ``python`` step)."""
    params = ctx.params
    dataset = load(str(params.get("path") or ""))
    identity = verify(dataset, bool(params.get("reference")))
    return {"path": dataset.path, "name": dataset.name, "sha256": dataset.sha256, "samples": len(dataset.samples),
            "verdict": identity["verdict"]}
