"""``cmx results export --format summary-csv DEST RUN...``: the submission checker's
``summary.csv`` columns (workloads.md §1.9), one row per system x benchmark x scenario.

``Result``/``Units`` come from the performance run (Offline samples/s, Server queries/s,
SingleStream/MultiStream early-stopping latency in ms, tokens/s for LLMs); ``Accuracy``
from the accuracy run of the same group. ``DEST`` may be a file or a directory (then
``DEST/summary.csv``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.errors import ResultsError
from cmx_mlperf.export import common
from cmx_mlperf.export.systems import framework, operating_system

COLUMNS = (
    "Organization", "Availability", "Division", "SystemType", "SystemName", "Platform", "Model",
    "MlperfModel", "Scenario", "Result", "Accuracy", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "accelerator_model_name", "accelerators_per_node", "total_accelerators", "Location",
    "framework", "operating_system", "notes", "compliance", "errors", "version", "inferred",
    "has_power", "Units", "weight_data_types", "design_power_watts", "PrivateID",
)


def row(group: common.Group) -> dict[str, Any]:
    doc, _ = group.primary()
    system = doc.get("system") or {}
    cpu = system.get("cpu") or {}
    accel = system.get("accelerator") or {}
    mlperf = doc.get("mlperf") or {}
    summary = mlperf.get("summary") or {}
    blockers = list(mlperf.get("submission_blockers") or [])
    if group.accuracy:
        blockers += [f"accuracy: {b}" for b in (group.accuracy[0].get("mlperf") or {}).get("submission_blockers") or []]
    return {
        "Organization": common.submitter(),
        "Availability": "rdi",
        "Division": doc["benchmark"].get("division") or "unofficial",
        "SystemType": system.get("type") or "",
        "SystemName": system.get("name") or group.system,
        "Platform": group.system,
        "Model": doc["benchmark"].get("task"),
        "MlperfModel": group.benchmark,
        "Scenario": group.scenario,
        "Result": summary.get("result") if group.performance else "",
        "Accuracy": common.accuracy_text(group.accuracy[0]) if group.accuracy else "",
        "number_of_nodes": system.get("number_of_nodes") or 1,
        "host_processor_model_name": cpu.get("model") or "",
        "host_processors_per_node": cpu.get("count_per_node") or "",
        "host_processor_core_count": cpu.get("core_count") or "",
        "accelerator_model_name": accel.get("name") or "",
        "accelerators_per_node": accel.get("count_per_node") or 0,
        "total_accelerators": accel.get("total_count") or 0,
        "Location": f"{common.division()}/{common.submitter()}/{group.location}",
        "framework": framework(doc.get("software") or {}),
        "operating_system": operating_system(system.get("os") or {}),
        "notes": "; ".join(blockers),
        "compliance": 0,
        "errors": len(blockers),
        "version": common.CHECKER_VERSION,
        "inferred": 0,
        "has_power": False,
        "Units": summary.get("units") or "",
        "weight_data_types": (doc.get("model") or {}).get("weight_data_types") or "",
        "design_power_watts": "",
        "PrivateID": doc.get("run_id"),
    }


def export(docs: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
    groups = common.group_documents(docs, run_dirs)
    dest = Path(dest)
    target = dest / "summary.csv" if dest.is_dir() else dest
    if not target.parent.is_dir():
        raise ResultsError(f"{target}: its directory {target.parent} does not exist; create it first")
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        for group in groups:
            writer.writerow(row(group))
