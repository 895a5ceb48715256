"""What both exporters need: selecting MLPerf documents, naming systems and benchmarks,
grouping runs, and locating a run's LoadGen logs."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from cmx_core.errors import ResultsError, UsageError

SUBMITTER_ENV = "CMX_MLPERF_SUBMITTER"
DIVISION_ENV = "CMX_MLPERF_DIVISION"
CHECKER_VERSION = "v6.1"
PERFORMANCE_MODES = ("PerformanceOnly", "SubmissionRun")
#: Embedded-config model key -> the benchmark directory name the submission checker expects.
SUBMISSION_BENCHMARK = {
    "resnet50": "resnet", "bert": "bert-99", "3d-unet": "3d-unet-99", "gptj": "gptj-99",
    "llama2-70b": "llama2-70b-99", "dlrm-v2": "dlrm-v2-99", "llama3_1-8b": "llama3.1-8b",
    "llama3_1-8b-edge": "llama3.1-8b-edge", "llama3_1-405b": "llama3.1-405b",
}


def submitter() -> str:
    return os.environ.get(SUBMITTER_ENV) or "cmx"


def division() -> str:
    """Division directory of the tree: ``closed`` unless ``CMX_MLPERF_DIVISION`` says
    ``open``/``network``; closed makes the checker apply every rule (the records themselves
    stay ``unofficial``)."""
    value = os.environ.get(DIVISION_ENV) or "closed"
    if value not in ("closed", "open", "network"):
        raise UsageError(f"{DIVISION_ENV}={value!r}: use closed, open or network")
    return value


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def system_id(doc: Mapping[str, Any]) -> str:
    """A stable system name: the detected name, else CPU model (+ accelerators)."""
    system = doc.get("system") or {}
    if system.get("name"):
        return slug(str(system["name"]))
    cpu = (system.get("cpu") or {}).get("model") or "cpu"
    accel = system.get("accelerator")
    if accel and accel.get("name"):
        return slug(f"{accel.get('count_per_node', 1)}x{accel['name']}_{cpu}")
    return slug(str(cpu))


def benchmark_name(doc: Mapping[str, Any]) -> str:
    key = str((doc.get("benchmark") or {}).get("mlperf_name") or doc["benchmark"]["task"])
    return SUBMISSION_BENCHMARK.get(key, key.replace("_", "."))


@dataclass
class Group:
    """The runs of one system x benchmark x scenario: the latest performance and accuracy run."""

    system: str
    benchmark: str
    scenario: str
    performance: tuple[Mapping[str, Any], Path] | None = None
    accuracy: tuple[Mapping[str, Any], Path] | None = None
    others: list[str] = field(default_factory=list)

    @property
    def location(self) -> str:
        return f"results/{self.system}/{self.benchmark}/{self.scenario}"

    def primary(self) -> tuple[Mapping[str, Any], Path]:
        found = self.performance or self.accuracy
        assert found is not None
        return found


def check_documents(docs: Sequence[Mapping[str, Any]]) -> None:
    for doc in docs:
        bench = doc.get("benchmark") or {}
        if bench.get("suite") != "mlperf-inference" or not isinstance(doc.get("mlperf"), Mapping):
            raise UsageError(f"run {doc.get('run_id')}: not an MLPerf Inference result "
                             f"(suite {bench.get('suite')!r}); export only mlperf.loadgen runs")
        if bench.get("mode") not in (*PERFORMANCE_MODES, "AccuracyOnly"):
            raise UsageError(f"run {doc.get('run_id')}: mode {bench.get('mode')} has no place in a submission; "
                             "export PerformanceOnly and AccuracyOnly runs")


def group_documents(docs: Sequence[Mapping[str, Any]], run_dirs: Sequence[Path]) -> list[Group]:
    """Group runs; a later run (by ``created_at``) replaces an earlier one of the same kind."""
    check_documents(docs)
    groups: dict[tuple[str, str, str], Group] = {}
    # the caller (cmx results export) passes one run directory per document
    for doc, run_dir in sorted(zip(docs, run_dirs, strict=True), key=lambda pair: str(pair[0].get("created_at"))):
        key = (system_id(doc), benchmark_name(doc), str(doc["benchmark"].get("scenario")))
        group = groups.setdefault(key, Group(*key))
        if doc["benchmark"]["mode"] == "AccuracyOnly":
            group.accuracy = (doc, Path(run_dir))
        else:
            group.performance = (doc, Path(run_dir))
    return list(groups.values())


@overload
def log_file(doc: Mapping[str, Any], run_dir: Path, name: str, required: Literal[True] = True) -> Path: ...
@overload
def log_file(doc: Mapping[str, Any], run_dir: Path, name: str, required: bool) -> Path | None: ...
def log_file(doc: Mapping[str, Any], run_dir: Path, name: str, required: bool = True) -> Path | None:
    """A LoadGen output of the run: from its artifacts, else ``mlperf.log_dir``."""
    candidates: list[Path] = []
    for artifact in doc.get("artifacts") or []:
        path = Path(str(artifact.get("path", "")))
        if path.name == name:
            candidates.append(path if path.is_absolute() else run_dir / path)
    log_dir = (doc.get("mlperf") or {}).get("log_dir")
    if log_dir:
        base = Path(str(log_dir))
        candidates.append((base if base.is_absolute() else run_dir / base) / name)
    for path in candidates:
        if path.is_file():
            return path
    if required:
        looked = ", ".join(map(str, candidates)) or "no recorded path"
        raise ResultsError(f"run {doc.get('run_id')}: {name} is missing from {run_dir} (looked at {looked})")
    return None


def accuracy_text(doc: Mapping[str, Any]) -> str:
    """The Accuracy column / accuracy.txt line in the reference scripts' formats."""
    accuracy = (doc.get("mlperf") or {}).get("accuracy") or {}
    if "top1" in accuracy:
        total = int(accuracy.get("samples", 0))
        good = round(accuracy["top1"] * total)
        return f"accuracy={100 * accuracy['top1']:.3f}%, good={good}, total={total}"
    items = ", ".join(f"'{k}': {v:.6g}" if isinstance(v, float) else f"'{k}': {v}" for k, v in accuracy.items())
    return "{" + items + "}"
