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


#: The scenarios the v6.1 checker accepts (required + optional) per benchmark and system type,
#: for the benchmarks cmx runs; a benchmark absent here is filed without a scenario check.
#: ``resnet`` is no datacenter benchmark in v6.1 and ``llama3.1-8b`` no edge one.
SCENARIOS: dict[str, dict[str, tuple[str, ...]]] = {
    "resnet": {"edge": ("SingleStream", "MultiStream", "Offline"),
               "datacenter,edge": ("SingleStream", "MultiStream", "Offline", "Server")},
    "bert-99": {"edge": ("SingleStream", "Offline"), "datacenter,edge": ("SingleStream", "Offline")},
    "3d-unet-99": {"datacenter": ("Offline",), "edge": ("SingleStream", "Offline"),
                   "datacenter,edge": ("SingleStream", "Offline")},
    "llama3.1-8b": {"datacenter": ("Offline", "Interactive", "Server"),
                    "datacenter,edge": ("Offline", "Interactive", "Server")},
    "llama3.1-8b-edge": {"edge": ("SingleStream", "Offline"), "datacenter,edge": ("SingleStream", "Offline")},
}
SYSTEM_TYPES = ("datacenter", "edge")
BOTH = "datacenter,edge"
SYSTEM_TYPE_OUTPUT = "system_type"


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
    """MLPerf's name of the run's benchmark: ``mlperf.mlperf_name``, else the older
    ``benchmark.mlperf_name`` (results written before it moved), else the task."""
    own = (doc.get("mlperf") or {}).get("mlperf_name") or (doc.get("benchmark") or {}).get("mlperf_name")
    key = str(own or doc["benchmark"]["task"])
    return SUBMISSION_BENCHMARK.get(key, key.replace("_", "."))


def requested_system_type(doc: Mapping[str, Any]) -> str | None:
    """The recipe's ``system_type`` output, else the detected ``system.type``
    (``CMX_SYSTEM_TYPE``), when it is ``datacenter`` or ``edge``; else None (auto)."""
    for value in ((doc.get("outputs") or {}).get(SYSTEM_TYPE_OUTPUT), (doc.get("system") or {}).get("type")):
        if value in SYSTEM_TYPES:
            return str(value)
    return None


def _variant(name: str, system_type: str) -> str:
    root = name.removesuffix("-edge")
    return f"{root}-edge" if system_type == "edge" and f"{root}-edge" in SCENARIOS else root


def placement(doc: Mapping[str, Any]) -> tuple[str, str]:
    """``(benchmark directory, system type)`` of a run.

    An ``-edge`` model is an edge run; otherwise the requested type (recipe input, else
    ``CMX_SYSTEM_TYPE``), else the first of datacenter, edge whose benchmark has the
    scenario; ``datacenter,edge`` where only that has it (resnet Server in v6.1). A
    datacenter-named model run as edge is filed under the ``-edge`` benchmark. A scenario
    with no place under the asked type is a ``UsageError``.
    """
    name = benchmark_name(doc)
    scenario = str(doc["benchmark"].get("scenario"))
    requested = requested_system_type(doc)
    if name.endswith("-edge") and name in SCENARIOS:
        if requested == "datacenter":
            raise UsageError(f"run {doc.get('run_id')}: {name} is an edge benchmark but the run's "
                             "system_type is datacenter; run it with --system_type=edge")
        requested = "edge"
    # resnet Server exists only for datacenter,edge systems in v6.1
    kinds = {None: [*SYSTEM_TYPES, BOTH], "datacenter": ["datacenter", BOTH], "edge": ["edge"]}[requested]
    for system_type in kinds:
        bench = _variant(name, system_type)
        if bench not in SCENARIOS:
            return bench, system_type
        if scenario in SCENARIOS[bench].get(system_type, ()):
            return bench, system_type
    allowed = "; ".join(f"{t} {_variant(name, t)}: {', '.join(SCENARIOS[_variant(name, t)].get(t, ())) or 'none'}"
                        for t in kinds[:1] if requested) or "no system type has it"
    hint = "run it with --system_type=edge" if requested == "datacenter" else (
        "run it with --system_type=datacenter" if requested else "use another scenario")
    raise UsageError(f"run {doc.get('run_id')}: {name} {scenario} has no place in an MLPerf Inference "
                     f"{CHECKER_VERSION} submission ({allowed}); {hint}")


def combined_system_type(types: Sequence[str]) -> str:
    """The ``system_type`` of a system description whose results are of these types."""
    found = set(types)
    if found == {"edge"}:
        return "edge"
    if found <= {"datacenter"}:
        return "datacenter"
    return "datacenter,edge"


@dataclass
class Group:
    """The runs of one system x benchmark x scenario: the latest performance and accuracy run."""

    system: str
    benchmark: str
    scenario: str
    system_type: str = "datacenter"
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
        bench, system_type = placement(doc)
        key = (system_id(doc), bench, str(doc["benchmark"].get("scenario")))
        group = groups.setdefault(key, Group(*key, system_type=system_type))
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


#: Benchmark -> (checker accuracy type, key of ``mlperf.accuracy``), in the checker's order.
_ROUGE_TYPES = (("ROUGE1", "rouge1"), ("ROUGE2", "rouge2"), ("ROUGEL", "rougeL"),
                ("ROUGELSUM", "rougeLsum"), ("GEN_LEN", "gen_len"))
ACCURACY_TYPES: dict[str, tuple[tuple[str, str], ...]] = {
    "resnet": (("acc", "top1"),), "llama3.1-8b": _ROUGE_TYPES, "llama3.1-8b-edge": _ROUGE_TYPES,
    "llama2-70b-99": (("ROUGE1", "rouge1"), ("ROUGE2", "rouge2"), ("ROUGEL", "rougeL"),
                      ("TOKENS_PER_SAMPLE", "tokens_per_sample")),
}


def number(value: Any) -> str:
    """A score as the reference scripts print it and the checker's ``[\\d.]+`` reads it:
    never in exponent notation; a whole number without a fraction."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if float(value).is_integer():
        return str(int(value))
    text = f"{float(value):.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def accuracy_text(doc: Mapping[str, Any]) -> str:
    """The accuracy.txt line in the reference scripts' formats: ImageNet's
    ``accuracy=76.000%, good=N, total=N``, else the evaluation dict ``{'rouge1': 38.7792, ...}``."""
    accuracy = (doc.get("mlperf") or {}).get("accuracy") or {}
    if "top1" in accuracy:
        total = int(accuracy.get("samples", 0))
        good = round(accuracy["top1"] * total)
        return f"accuracy={100 * accuracy['top1']:.3f}%, good={good}, total={total}"
    return "{" + ", ".join(f"'{k}': {number(v)}" for k, v in accuracy.items()) + "}"


def accuracy_metrics(doc: Mapping[str, Any], benchmark: str) -> dict[str, str]:
    """What the checker reads from accuracy.txt: accuracy type -> the number as written."""
    accuracy = (doc.get("mlperf") or {}).get("accuracy") or {}
    types = ACCURACY_TYPES.get(benchmark)
    if types is None:
        return {k.upper(): number(v) for k, v in accuracy.items() if isinstance(v, (int, float))}
    found = {}
    for kind, key in types:
        if key in accuracy:
            found[kind] = f"{100 * accuracy[key]:.3f}" if key == "top1" else number(accuracy[key])
    return found


def accuracy_column(doc: Mapping[str, Any], benchmark: str) -> str:
    """summary.csv's Accuracy: ``TYPE: value`` pairs two spaces apart (the checker writes its
    dict as JSON, commas turned into spaces, quotes and braces dropped)."""
    return "  ".join(f"{k}: {v}" for k, v in accuracy_metrics(doc, benchmark).items())
