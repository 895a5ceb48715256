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
from cmx_mlperf.export.submission import system_records

COLUMNS = (
    "Organization", "Availability", "Division", "SystemType", "SystemName", "Platform", "Model",
    "MlperfModel", "Scenario", "Result", "Accuracy", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "accelerator_model_name", "accelerators_per_node", "total_accelerators", "Location",
    "framework", "operating_system", "notes", "compliance", "errors", "version", "inferred",
    "has_power", "Units", "weight_data_types", "design_power_watts", "PrivateID",
)


def row(group: common.Group, record: Mapping[str, Any]) -> dict[str, Any]:
    """One row, the system columns from the system description ``record`` as the checker
    takes them; Division and compliance are the tree's division."""
    doc, _ = group.primary()
    mlperf = doc.get("mlperf") or {}
    summary = mlperf.get("summary") or {}
    blockers = list(mlperf.get("submission_blockers") or [])
    if group.accuracy:
        blockers += [f"accuracy: {b}" for b in (group.accuracy[0].get("mlperf") or {}).get("submission_blockers") or []]
    nodes = record["number_of_nodes"]
    accelerators = record["accelerators_per_node"]
    return {
        "Organization": common.submitter(),
        "Availability": record["status"],
        "Division": common.division(),
        "SystemType": record["system_type"],
        "SystemName": record["system_name"],
        "Platform": group.system,
        "Model": group.benchmark,
        "MlperfModel": group.benchmark,
        "Scenario": group.scenario,
        "Result": summary.get("result") if group.performance else "",
        "Accuracy": common.accuracy_column(group.accuracy[0], group.benchmark) if group.accuracy else "",
        "number_of_nodes": nodes,
        "host_processor_model_name": record["host_processor_model_name"],
        "host_processors_per_node": record["host_processors_per_node"],
        "host_processor_core_count": record["host_processor_core_count"],
        "accelerator_model_name": record["accelerator_model_name"],
        "accelerators_per_node": accelerators,
        "total_accelerators": int(nodes) * int(accelerators),
        "Location": f"{common.division()}/{common.submitter()}/{group.location}/performance/run_1",
        "framework": record["framework"],
        "operating_system": record["operating_system"],
        "notes": "; ".join(blockers),
        "compliance": common.division(),
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
        records = system_records(groups)
        for group in groups:
            writer.writerow(row(group, records[group.system]))
