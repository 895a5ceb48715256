"""``cmx results export --format mlperf-training DIR RUN...``: an MLPerf Training submission
tree of time-to-accuracy runs, as mlperf-logging's package checker and result summarizer read
it::

    DIR/<submitter>/
      systems/<system>.json                     the system description (its checker's fields)
      results/<system>/<benchmark>/result_<i>.txt  each run's mlperf_log.txt, as written
      benchmarks/<benchmark>/implementations/cmx/README.md   how the runs were made

Every run must be a time-to-accuracy run of one MLPerf benchmark (``train.compliance``
``mlperf_benchmark``), under one ruleset, on one system, and there must be exactly as many as
MLPerf asks for that benchmark (``mlperf_logging.benchmark_meta``: 5 for ``resnet``); anything
else is refused with what to do. The division is the logs' own (``open``) and the status
``Research, Development, or Internal (RDI)``; ``CMX_MLPERF_SUBMITTER`` (default ``cmx``) names
the submitter's folder. The runs stay ``unofficial``: the tree lets the official tools read
them, it does not make them MLPerf results (the README says why, from the runs' own
``unofficial_reasons``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmx_core.api import ResultsError

STATUS = "Research, Development, or Internal (RDI)"
DIVISION = "open"
NOT_RECORDED = "not recorded by the run"


def export(docs: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
    runs = [_run(doc, run_dir) for doc, run_dir in zip(docs, run_dirs, strict=True)]
    benchmark, ruleset, system = _one(runs, "benchmark"), _one(runs, "ruleset"), _one(runs, "system")
    wanted = result_count(benchmark)
    if len(runs) != wanted:
        raise ResultsError(f"mlperf-training export: MLPerf Training asks for exactly {wanted} runs of {benchmark}, "
                           f"got {len(runs)}; export {wanted} time-to-accuracy runs of it (e.g. a sweep over seed)")
    root = Path(dest) / submitter()
    if root.exists() and any(root.iterdir()):
        raise ResultsError(f"{root}: already holds a submission; export into an empty directory")
    results = root / "results" / system / benchmark
    results.mkdir(parents=True)
    for index, run in enumerate(runs):
        shutil.copyfile(run["log"], results / f"result_{index}.txt")
    _write(root / "systems" / f"{system}.json", json.dumps(system_description(docs[0], system), indent=2) + "\n")
    _write(root / "benchmarks" / benchmark / "implementations" / "cmx" / "README.md",
           _readme(benchmark, ruleset, docs))


def submitter() -> str:
    return os.environ.get("CMX_MLPERF_SUBMITTER", "") or "cmx"


def result_count(benchmark: str) -> int:
    """How many runs MLPerf Training asks for ``benchmark`` (mlperf-logging's own table)."""
    # deferred: mlperf_logging only when a tree is exported
    from mlperf_logging.benchmark_meta import get_result_file_counts  # type: ignore[import-untyped]

    counts: dict[str, int] = get_result_file_counts("training")
    return counts[benchmark]


def _run(doc: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """What the tree needs of one run; a ResultsError when it is not an exportable one."""
    run_id = doc.get("run_id", run_dir.name)
    section = doc.get("train") or {}
    compliance = section.get("compliance") or {}
    if section.get("mode") != "time-to-accuracy" or not compliance:
        raise ResultsError(f"mlperf-training export: run {run_id} is not a time-to-accuracy training run; "
                           "export runs of the train,time-to-accuracy recipe")
    if not compliance.get("mlperf_benchmark"):
        model = (section.get("model") or {}).get("name")
        raise ResultsError(f"mlperf-training export: run {run_id} trains {model}, which no MLPerf Training ruleset "
                           "names; use an MLPerf benchmark's model (--model=resnet50)")
    found = [a for a in doc.get("artifacts") or [] if a.get("kind") == "mlperf_log"]
    log = run_dir / found[0]["path"] if found else run_dir / "mlperf_log.txt"
    if not log.is_file():
        raise ResultsError(f"mlperf-training export: run {run_id} has no mlperf_log.txt in {run_dir}")
    benchmark = _benchmark_of(log)
    return {"benchmark": benchmark, "ruleset": str(compliance["ruleset"]).removeprefix("training "),
            "system": _system_name(doc), "log": log}


def _benchmark_of(log: Path) -> str:
    """The ``submission_benchmark`` the log states."""
    for line in log.read_text(encoding="utf-8").splitlines():
        if '"submission_benchmark"' in line:
            return str(json.loads(line.split(":::MLLOG", 1)[1])["value"])
    raise ResultsError(f"mlperf-training export: {log} states no submission_benchmark")


def _one(runs: Sequence[Mapping[str, Any]], key: str) -> str:
    values = sorted({str(run[key]) for run in runs})
    if len(values) != 1:
        raise ResultsError(f"mlperf-training export: the runs differ in {key} ({', '.join(values) or 'none'}); "
                           f"export runs of one {key}")
    return values[0]


def _system_name(doc: Mapping[str, Any]) -> str:
    system = doc.get("system") or {}
    label = (system.get("hardware_class") or {}).get("id") or system.get("name") or "system"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"cmx_{label}")


def system_description(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``systems/<name>.json`` with every field mlperf-logging's system description checker
    asks for, from the run's detected facts (``NOT_RECORDED`` where the run has none)."""
    system, software = doc.get("system") or {}, doc.get("software") or {}
    cpu, memory, os_facts = system.get("cpu") or {}, system.get("memory") or {}, system.get("os") or {}
    accelerator = system.get("accelerator") or {}
    torch = (software.get("packages") or {}).get("torch")
    memory_bytes = memory.get("capacity_bytes")
    return {
        "submitter": submitter(), "division": DIVISION, "status": STATUS, "system_name": name,
        "number_of_nodes": str(system.get("number_of_nodes") or 1),
        "host_processors_per_node": str(cpu.get("count_per_node") or NOT_RECORDED),
        "host_processor_model_name": cpu.get("model") or NOT_RECORDED,
        "host_processor_core_count": str(cpu.get("core_count") or NOT_RECORDED),
        "host_processor_vcpu_count": str(cpu.get("vcpu_count") or NOT_RECORDED),
        "host_processor_frequency": f"{cpu['frequency_mhz']:.0f} MHz" if cpu.get("frequency_mhz") else NOT_RECORDED,
        "host_processor_caches": NOT_RECORDED, "host_processor_interconnect": NOT_RECORDED,
        "host_memory_capacity": f"{memory_bytes / 2**30:.0f} GiB" if memory_bytes else NOT_RECORDED,
        "host_storage_type": NOT_RECORDED, "host_storage_capacity": NOT_RECORDED,
        "host_networking": NOT_RECORDED, "host_networking_topology": NOT_RECORDED,
        "host_memory_configuration": NOT_RECORDED,
        "accelerators_per_node": str(accelerator.get("count") or 0),
        "accelerator_model_name": accelerator.get("name") or "none",
        "accelerator_host_interconnect": NOT_RECORDED, "accelerator_frequency": NOT_RECORDED,
        "accelerator_on-chip_memories": NOT_RECORDED, "accelerator_memory_configuration": NOT_RECORDED,
        "accelerator_memory_capacity": NOT_RECORDED, "accelerator_interconnect": NOT_RECORDED,
        "accelerator_interconnect_topology": NOT_RECORDED, "cooling": NOT_RECORDED,
        "hw_notes": f"detected by cmx: {(system.get('hardware_class') or {}).get('label', NOT_RECORDED)}",
        "framework": f"PyTorch {torch}" if torch else NOT_RECORDED,
        "other_software_stack": f"cmx {(software.get('engine') or {}).get('version', '')}, "
                                f"Python {software.get('python', '')}",
        "operating_system": os_facts.get("pretty_name") or NOT_RECORDED,
        "sw_notes": "unofficial runs exported by cmx; see benchmarks/*/implementations/cmx/README.md",
    }


def _readme(benchmark: str, ruleset: str, docs: Sequence[Mapping[str, Any]]) -> str:
    reasons = sorted({r for doc in docs for r in (doc.get("train") or {}).get("unofficial_reasons") or []})
    lines = [f"# {benchmark}: runs made with cmx", "",
             f"Time-to-accuracy runs of cmx's `train,time-to-accuracy` recipe, logged with mlperf-logging's mllog "
             f"and checked with its compliance checker, unmodified, under training {ruleset}. They are unofficial:",
             "", *(f"* {reason}" for reason in reasons), "", "Runs:", "",
             *(f"* {doc.get('run_id')}" for doc in docs), ""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
