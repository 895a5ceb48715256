"""``cmx results export --format mlperf-submission DIR RUN...``: the MLPerf Inference
submission tree (workloads.md §1.9)::

    DIR/<division>/<submitter>/
      systems/<system_id>.json
      documentation/calibration.md
      src/README.md
      results/<system_id>/<benchmark>/<scenario>/
        performance/run_1/{mlperf_log_summary.txt, mlperf_log_detail.txt}
        accuracy/{accuracy.txt, mlperf_log_accuracy.json, mlperf_log_detail.txt, mlperf_log_summary.txt}
        measurements.json  user.conf  README.md

Per system x benchmark x scenario the latest PerformanceOnly run and the latest AccuracyOnly
run are used. The accuracy log is truncated the way MLPerf's ``truncate_accuracy_log.py``
does it (from 4096 bytes on: the first and last 4096 bytes around ``"\n\n...\n\n"``, so
always under the checker's 10 KB limit) and ``hash=<sha256 of the full log>`` is written into
``accuracy.txt``. Each run is filed under the benchmark of its system type (recipe input
``system_type``, else ``CMX_SYSTEM_TYPE``, else the type whose benchmark has the scenario;
see ``common.placement``), and a system holding both kinds is ``datacenter,edge``.
``CMX_MLPERF_SUBMITTER`` (default ``cmx``) and
``CMX_MLPERF_DIVISION`` (default ``closed``) name the tree's top directories.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmx_core.errors import ResultsError
from cmx_mlperf.export import common
from cmx_mlperf.export.systems import system_json
from cmx_mlperf.harness.accuracy import file_sha256

MAX_ACCURACY_LOG_BYTES = 10 * 1024  # the checker's limit
VIEWABLE_BYTES = 4096  # kept at each end, as truncate_accuracy_log.py does
LOGS = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")

NOT_RECORDED = "not recorded by the run"


def export(docs: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
    groups = common.group_documents(docs, run_dirs)
    root = Path(dest) / common.division() / common.submitter()
    if root.exists() and any(root.iterdir()):
        raise ResultsError(f"{root}: already holds a submission; export into an empty directory")
    root.mkdir(parents=True, exist_ok=True)
    for group in groups:
        write_group(root, group)
    for name, record in system_records(groups).items():
        _write(root / "systems" / f"{name}.json", json.dumps(record, indent=2) + "\n")
    _write(root / "src" / "README.md", _src_readme(groups))
    _write(root / "documentation" / "calibration.md", calibration_md(groups))


def system_records(groups: Sequence[common.Group]) -> dict[str, dict[str, Any]]:
    """``systems/<name>.json`` of each system: from its first group's run, its type the
    union of its groups' types."""
    docs: dict[str, Mapping[str, Any]] = {}
    types: dict[str, list[str]] = {}
    for group in groups:
        docs.setdefault(group.system, group.primary()[0])
        types.setdefault(group.system, []).append(group.system_type)
    return {name: system_json(doc, common.division(), common.submitter(), name,
                              common.combined_system_type(types[name]))
            for name, doc in docs.items()}


def calibration_md(groups: Sequence[common.Group]) -> str:
    """``documentation/calibration.md`` (closed and network divisions require it): how each
    benchmark's weights were calibrated. cmx runs the weights as given, without quantization."""
    lines = ["# Calibration", "",
             "cmx-mlperf runs each model with the weights as given: no post-training quantization, "
             "so no calibration data set was used.", ""]
    for group in groups:
        doc, _ = group.primary()
        model = doc.get("model") or {}
        weights = model.get("weight_data_types") or NOT_RECORDED
        lines.append(f"- {group.benchmark} {group.scenario}: weights {weights}, "
                     f"model {model.get('name') or doc['benchmark'].get('task')}, not quantized")
    return "\n".join(lines) + "\n"


def write_group(root: Path, group: common.Group) -> None:
    base = root / group.location
    if group.performance:
        doc, run_dir = group.performance
        for name in LOGS:
            _copy(common.log_file(doc, run_dir, name), base / "performance" / "run_1" / name)
        conf = common.log_file(doc, run_dir, "user.conf", required=False)
        if conf:
            _copy(conf, base / "user.conf")
    if group.accuracy:
        doc, run_dir = group.accuracy
        for name in LOGS:
            _copy(common.log_file(doc, run_dir, name), base / "accuracy" / name)
        full_log = common.log_file(doc, run_dir, "mlperf_log_accuracy.json")
        truncate_accuracy_log(full_log, base / "accuracy" / "mlperf_log_accuracy.json")
        _write(base / "accuracy" / "accuracy.txt",
               f"{common.accuracy_text(doc)}\nhash={file_sha256(full_log)}\n")
    doc, _ = group.primary()
    _write(base / "measurements.json", json.dumps(measurements(doc), indent=2) + "\n")
    _write(base / "README.md", _group_readme(group))


def truncate_accuracy_log(source: Path, target: Path) -> None:
    """Copy ``source``; from 4096 bytes on keep only its first and last 4096 bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    size = source.stat().st_size
    if size < VIEWABLE_BYTES:
        shutil.copyfile(source, target)
        return
    with open(source, "rb") as handle:
        head = handle.read(VIEWABLE_BYTES)
        handle.seek(size - VIEWABLE_BYTES)
        tail = handle.read(VIEWABLE_BYTES)
    target.write_bytes(head + b"\n\n...\n\n" + tail)


def measurements(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``measurements.json``: the weights as the run recorded them (the directory, its digest,
    the data type it ran in); a value the run did not record is said to be so, never guessed."""
    model = doc.get("model") or {}
    weights = model.get("weight_data_types") or NOT_RECORDED
    return {
        "input_data_types": weights,
        "retraining": "No",
        "starting_weights_filename": model.get("source") or model.get("served_name") or model.get("name")
        or NOT_RECORDED,
        "weight_data_types": weights,
        "weight_transformations": "none",
        "starting_weights_sha256": model.get("sha256"),
        "cmx_run_id": doc.get("run_id"),
    }


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _group_readme(group: common.Group) -> str:
    lines = [f"# {group.benchmark} {group.scenario} on {group.system}", "",
             "Exported by cmx-mlperf. These runs are division 'unofficial'.", ""]
    for kind, found in (("performance", group.performance), ("accuracy", group.accuracy)):
        if not found:
            mode = "AccuracyOnly" if kind == "accuracy" else "PerformanceOnly"
            lines.append(f"- {kind}: missing (run the recipe with mode {mode})")
            continue
        doc = found[0]
        blockers = (doc.get("mlperf") or {}).get("submission_blockers") or []
        lines.append(f"- {kind}: run {doc.get('run_id')}, status {doc.get('status')}")
        lines.extend(f"  - not submittable: {b}" for b in blockers)
    return "\n".join(lines) + "\n"


def _src_readme(groups: Sequence[common.Group]) -> str:
    names = sorted({g.benchmark for g in groups})
    return ("# Source\n\nThe harness is cmx-mlperf (LoadGen in a fresh process per test); "
            f"benchmarks: {', '.join(names)}.\n")
