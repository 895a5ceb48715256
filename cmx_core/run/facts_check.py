"""A run on this machine with another machine's ``--facts`` is refused.

A facts file stands in for detection: it is how ``cmx plan`` plans for a machine it is not
on, and how a remote executor (Slurm, Ray, Kubernetes) is planned for the nodes it submits
to. An executor that runs the plan here (``local``, ``docker``) would record those facts as
the machine it measured on, so a file whose hardware detection here does not find is bad
input (exit 2), refused before anything runs. Every hardware field the file states is
checked: the GPU list (names, and each device's memory), the node's GPUs, the accelerator
tags (when it lists no GPUs), the CPU model, sockets, cores and threads, and the memory.
Memory may differ by :data:`MEMORY_TOLERANCE` (what the kernel reports as total moves by a
few MB between boots and kernels); counts and names must be equal. A field the file leaves
out, or one detection here cannot tell, contradicts nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.facts.store import FactStore


@dataclass(frozen=True)
class FactsFileRef:
    """The facts file a run used: its path and the sha256 of its bytes (``provenance.facts_file``)."""

    path: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}


def facts_file_ref(path: Path) -> FactsFileRef:
    """The reference recorded in a result's provenance for the facts file at ``path``."""
    return FactsFileRef(str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest())


def gpu_names(gpus: Any) -> list[str]:
    """The sorted device names of a ``gpus`` fact (none for a missing or empty fact)."""
    devices = gpus.get("devices") if isinstance(gpus, Mapping) else None
    return sorted(str(d.get("name") or d.get("accelerator_tag") or "?") for d in devices or ()
                  if isinstance(d, Mapping))


def cpu_model(cpu: Any) -> str | None:
    model = cpu.get("model") if isinstance(cpu, Mapping) else None
    return str(model) if model else None


MEMORY_TOLERANCE = 0.01
"""How far a stated memory size (``memory.total_bytes``, a GPU's ``memory_total_bytes``) may be
from the detected one, as a fraction of the detected size: 1 %. ``MemTotal`` moves by a few MB
with the kernel's reservations; another machine's memory is further off than that."""

CPU_COUNTS = ("sockets", "cores", "threads")
"""The ``cpu`` fields that count hardware, compared exactly."""

_GIB = float(1 << 30)


@dataclass(frozen=True)
class Mismatch:
    """One hardware field of a facts file that detection here contradicts: its name, what the
    file claims and what is detected (each as shown in the refusal)."""

    field: str
    claimed: str
    detected: str

    def __str__(self) -> str:
        return f"{self.field} {self.claimed}, here {self.detected}"


def contradictions(file_facts: Mapping[str, Any], here: FactStore) -> list[str]:
    """What the facts file says about this machine's hardware that detection here does not find."""
    return [str(m) for m in mismatches(file_facts, here)]


def mismatches(file_facts: Mapping[str, Any], here: FactStore) -> list[Mismatch]:
    """Each hardware field of ``file_facts`` that detection here contradicts (see the module doc)."""
    found = _gpu_mismatches(file_facts, here)
    theirs_cpu = cpu_model(file_facts.get("cpu"))
    ours_cpu_fact = _here(here, "cpu")
    if theirs_cpu is not None:
        ours_cpu = cpu_model(ours_cpu_fact)
        if ours_cpu is not None and ours_cpu != theirs_cpu:
            found.append(Mismatch("CPU", f"'{theirs_cpu}'", f"'{ours_cpu}'"))
    found += _count_mismatches(file_facts.get("cpu"), ours_cpu_fact)
    found += _memory_mismatch(file_facts.get("memory"), _here(here, "memory"))
    return found


def _gpu_mismatches(file_facts: Mapping[str, Any], here: FactStore) -> list[Mismatch]:
    """The GPU list (names, then each device's memory), the node's GPUs, or the accelerator tags."""
    found: list[Mismatch] = []
    if "gpus" in file_facts:
        found += _devices_mismatch("GPUs", "gpus", file_facts.get("gpus"), _here(here, "gpus"))
    elif file_facts.get("accelerator"):
        theirs_tags, ours_tags = _tags(file_facts["accelerator"]), _tags(_here(here, "accelerator"))
        if theirs_tags != ours_tags:
            found.append(Mismatch("accelerator", ",".join(theirs_tags), ",".join(ours_tags) or "none"))
    if "node_gpus" in file_facts and "node_gpus" in here.available():
        found += _devices_mismatch("node_gpus", "node_gpus", file_facts.get("node_gpus"), _here(here, "node_gpus"))
    return found


def _devices_mismatch(label: str, name: str, theirs: Any, ours: Any) -> list[Mismatch]:
    """The device names differ (one mismatch), else each device whose memory differs."""
    theirs_names, ours_names = gpu_names(theirs), gpu_names(ours)
    if theirs_names != ours_names:
        return [Mismatch(label, _gpus_text(theirs_names), _gpus_text(ours_names))]
    found = []
    for (index, claimed), detected in zip(_device_memory(theirs), [m for _, m in _device_memory(ours)], strict=True):
        if claimed is not None and detected is not None and not _close(claimed, detected):
            found.append(Mismatch(f"{name}.devices[{index}].memory_total_bytes", _bytes_text(claimed),
                                  f"{_bytes_text(detected)} (tolerance {MEMORY_TOLERANCE:.0%})"))
    return found


def _device_memory(gpus: Any) -> list[tuple[int, int | None]]:
    """(position, memory_total_bytes) of each device, ordered by name then index (as compared)."""
    devices = gpus.get("devices") if isinstance(gpus, Mapping) else None
    listed = [d for d in devices or () if isinstance(d, Mapping)]
    ordered = sorted(enumerate(listed), key=lambda pair: (str(pair[1].get("name") or pair[1].get("accelerator_tag")
                                                                   or "?"), _count(pair[1].get("index")) or 0))
    return [(position, _count(device.get("memory_total_bytes"))) for position, device in ordered]


def _count_mismatches(theirs: Any, ours: Any) -> list[Mismatch]:
    """``cpu.sockets``, ``cpu.cores`` and ``cpu.threads``: stated and detected must be equal."""
    if not isinstance(theirs, Mapping) or not isinstance(ours, Mapping):
        return []
    found = []
    for key in CPU_COUNTS:
        claimed, detected = _count(theirs.get(key)), _count(ours.get(key))
        if claimed is not None and detected is not None and claimed != detected:
            found.append(Mismatch(f"cpu.{key}", str(claimed), str(detected)))
    return found


def _memory_mismatch(theirs: Any, ours: Any) -> list[Mismatch]:
    """``memory.total_bytes``, within :data:`MEMORY_TOLERANCE` of the detected size."""
    claimed = _count(theirs.get("total_bytes")) if isinstance(theirs, Mapping) else None
    detected = _count(ours.get("total_bytes")) if isinstance(ours, Mapping) else None
    if claimed is None or detected is None or _close(claimed, detected):
        return []
    return [Mismatch("memory.total_bytes", _bytes_text(claimed),
                     f"{_bytes_text(detected)} (tolerance {MEMORY_TOLERANCE:.0%})")]


def _count(value: Any) -> int | None:
    """An integer fact value; None for a missing or non-integer one (nothing to compare)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _close(claimed: int, detected: int) -> bool:
    return abs(claimed - detected) <= MEMORY_TOLERANCE * detected


def _bytes_text(value: int) -> str:
    return f"{value} ({value / _GIB:.1f} GiB)"


def _here(store: FactStore, name: str) -> Any:
    """A fact as detected here; None when no loaded detector provides it."""
    return store.try_get(name) if name in store.available() else None


def _tags(value: Any) -> list[str]:
    return sorted(str(v) for v in value) if isinstance(value, list) else []


def _gpus_text(names: list[str]) -> str:
    if not names:
        return "none"
    counts = {name: names.count(name) for name in names}
    return ", ".join(f"{count}x {name}" for name, count in counts.items())


def check_facts_here(facts: FactStore, detectors_here: FactStore, executor: str, runs_here: bool) -> None:
    """Refuse (exit 2) a run by an executor that runs on this machine when its facts file
    contradicts what detection here finds."""
    if facts.file_facts is None or not runs_here:
        return
    found = contradictions(facts.file_facts, detectors_here)
    if found:
        raise UsageError(
            f"--facts {facts.source} describes another machine ({'; '.join(found)}), and executor "
            f"'{executor}' runs on this one: --facts is for planning (cmx plan) and for remote executors "
            "whose machines those facts describe (--executor slurm, ray or k8s); drop --facts to run here")
