"""The submission's ``systems/<system_id>.json``: the 35 fields the checker requires,
filled from the result document's detected ``system`` and ``software``.

A fact cmx does not detect is written as ``"not detected"``; a field that does not apply
(accelerator fields on a CPU-only system, networking of a single node) as ``"N/A"``; no
field is left empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_DETECTED = "not detected"
NA = "N/A"
REQUIRED_FIELDS = (
    "division", "submitter", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_storage_capacity", "host_storage_type",
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack",
    "host_processor_frequency", "host_processor_caches", "host_memory_configuration",
    "host_processor_interconnect", "host_networking", "host_networking_topology",
    "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes",
    "host_network_card_count", "system_type_detail",
)


def _or(value: Any, default: str = NOT_DETECTED) -> Any:
    return default if value in (None, "", []) else value


def _gb(value: Any) -> str:
    return f"{value / 2**30:.0f} GB" if isinstance(value, (int, float)) and value > 0 else NOT_DETECTED


def framework(software: Mapping[str, Any], serving: Mapping[str, Any] | None = None) -> str:
    """The framework the run measured: the serving engine an HTTP SUT drove, as the server
    reported it (``mlperf.serving``), with the torch and CUDA it runs on where recorded;
    else the framework of the SUT's own process."""
    packages = software.get("packages") or {}
    if serving and serving.get("engine"):
        names = {"vllm": "vLLM", "sglang": "SGLang"}
        engine = f"{names.get(str(serving['engine']).lower(), serving['engine'])} {serving.get('version') or ''}"
        below = [f"PyTorch {packages['torch']}"] if packages.get("torch") else []
        below += [f"CUDA {packages['torch-cuda']}"] if packages.get("torch-cuda") else []
        return engine.strip() + (f" ({', '.join(below)})" if below else "")
    name = software.get("framework")
    if not name:
        return "Python (no ML framework)"
    names = {"pytorch": "PyTorch", "torch": "PyTorch"}
    return f"{names.get(str(name), name)} {software.get('framework_version') or ''}".strip()


def operating_system(os_facts: Mapping[str, Any]) -> str:
    parts = [os_facts.get("distro") or os_facts.get("name"), os_facts.get("version")]
    text = " ".join(str(p) for p in parts if p)
    if os_facts.get("kernel"):
        text += f" (kernel {os_facts['kernel']})"
    return text or NOT_DETECTED


def system_json(doc: Mapping[str, Any], division: str, submitter: str, system_id: str,
                system_type: str = "datacenter") -> dict[str, Any]:
    """The checker's system description. ``system_type``: ``datacenter``, ``edge`` or
    ``datacenter,edge`` (what decides which benchmarks and scenarios the results may hold).
    ``accelerators_per_node`` of a CPU-only system is the string ``"0"``: the checker refuses
    a falsy value there and reads it with ``int()``."""
    system = doc.get("system") or {}
    software = doc.get("software") or {}
    cpu = system.get("cpu") or {}
    accel = system.get("accelerator") or None
    nodes = int(system.get("number_of_nodes") or 1)
    packages = software.get("packages") or {}
    engine = software.get("engine") or {}
    stack = [f"Python {software.get('python')}"] + [f"{k} {v}" for k, v in sorted(packages.items())]
    stack.append(f"cmx {engine.get('version', '')}".strip())
    single = NA + " (single node)"
    record = {
        "division": division,
        "submitter": submitter,
        "status": "rdi",
        "system_name": system.get("name") or system_id,
        "number_of_nodes": nodes,
        "host_processor_model_name": _or(cpu.get("model")),
        "host_processors_per_node": _or(cpu.get("count_per_node")),
        "host_processor_core_count": _or(cpu.get("core_count")),
        "host_memory_capacity": _gb((system.get("memory") or {}).get("capacity_bytes")),
        "host_storage_capacity": NOT_DETECTED,
        "host_storage_type": NOT_DETECTED,
        "accelerators_per_node": _count(accel.get("count_per_node") if accel else 0),
        "accelerator_model_name": _or(accel.get("name")) if accel else NA,
        "accelerator_memory_capacity": _gb(accel.get("memory_capacity_bytes")) if accel else NA,
        "framework": framework(software, (doc.get("mlperf") or {}).get("serving")),
        "operating_system": operating_system(system.get("os") or {}),
        "system_type": system_type,
        "other_software_stack": ", ".join(stack),
        "host_processor_frequency": f"{cpu['frequency_mhz']:.0f} MHz" if cpu.get("frequency_mhz") else NOT_DETECTED,
        "host_processor_caches": NOT_DETECTED,
        "host_memory_configuration": NOT_DETECTED,
        "host_processor_interconnect": NOT_DETECTED,
        "host_networking": single if nodes == 1 else NOT_DETECTED,
        "host_networking_topology": single if nodes == 1 else NOT_DETECTED,
        "host_network_card_count": single if nodes == 1 else NOT_DETECTED,
        "cooling": NOT_DETECTED,
        "hw_notes": _hw_notes(system, accel),
        "sw_notes": f"Generated by cmx-mlperf from run {doc.get('run_id')}; records are division 'unofficial'.",
        "system_type_detail": str(system.get("type") or NOT_DETECTED),
    }
    for key in ("accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
                "accelerator_interconnect_topology", "accelerator_memory_configuration",
                "accelerator_on-chip_memories"):
        record[key] = NOT_DETECTED if accel else NA
    return {key: record[key] for key in REQUIRED_FIELDS}


def _count(value: Any) -> int | str:
    count = int(value or 0)
    return count if count > 0 else "0"


def _hw_notes(system: Mapping[str, Any], accel: Mapping[str, Any] | None) -> str:
    notes = [f"vCPUs: {(system.get('cpu') or {}).get('vcpu_count') or NOT_DETECTED}"]
    if accel:
        for key in ("driver_version", "cuda_version", "compute_capability", "mig_profile"):
            if accel.get(key):
                notes.append(f"{key}: {accel[key]}")
    container = system.get("container")
    if container:
        notes.append(f"container: {container.get('image')} {container.get('digest') or ''}".strip())
    return "; ".join(notes)
