"""``hardware_class``: the fingerprint of what makes two results comparable.

Two runs are like for like when their accelerator model and count, accelerator memory,
interconnect, driver branch, CPU model, core count and memory agree. Host names, serial
numbers, clocks and free memory are left out on purpose: they differ between identical
machines (naive ``machine_info`` equality, as in pytest-benchmark, splits them). The class
is computed from a result's ``system`` section (itself derived from the detected facts), so
it can be recomputed for documents written before it existed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

_GIB = 1 << 30


@dataclass(frozen=True)
class HardwareClass:
    """The comparable hardware of one node (null fields: unknown)."""

    accelerator: str | None
    accelerator_count: int
    accelerator_memory_gib: int | None
    interconnect: str | None
    driver_branch: str | None
    cpu_model: str | None
    cpu_cores: int | None
    memory_gib: int | None

    @property
    def id(self) -> str:
        """``hc-`` and 12 hex digits of the sha256 of the fields (stable across machines)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return "hc-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """A short human description, e.g. ``8x h100 80GiB nvlink drv550 | Xeon 112c | 2016GiB``."""
        if self.accelerator:
            accel = f"{self.accelerator_count}x {self.accelerator}"
            accel += f" {self.accelerator_memory_gib}GiB" if self.accelerator_memory_gib else ""
            accel += f" {self.interconnect}" if self.interconnect else ""
            accel += f" drv{self.driver_branch}" if self.driver_branch else ""
        else:
            accel = "no accelerator"
        cpu = f"{self.cpu_model or 'cpu ?'} {self.cpu_cores or '?'}c"
        return f"{accel} | {cpu} | {self.memory_gib if self.memory_gib is not None else '?'}GiB"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, **asdict(self)}

    def differences(self, other: HardwareClass) -> list[str]:
        """``field a -> b`` for each field that differs."""
        mine, theirs = asdict(self), asdict(other)
        return [f"{k} {mine[k]} -> {theirs[k]}" for k in mine if mine[k] != theirs[k]]


def from_system(system: Mapping[str, Any]) -> HardwareClass:
    """The class of a result's ``system`` section."""
    accel = _section(system, "accelerator")
    cpu = _section(system, "cpu") or {}
    memory = _section(system, "memory") or {}
    return HardwareClass(
        accelerator=_accelerator_name(accel) if accel else None,
        accelerator_count=int(accel.get("total_count") or 0) if accel else 0,
        accelerator_memory_gib=_gib(accel.get("memory_capacity_bytes")) if accel else None,
        interconnect=_text(accel.get("interconnect")) if accel else None,
        driver_branch=_branch(accel.get("driver_version")) if accel else None,
        cpu_model=_text(cpu.get("model")),
        cpu_cores=cpu.get("core_count") if isinstance(cpu.get("core_count"), int) else None,
        memory_gib=_gib(memory.get("capacity_bytes")),
    )


def of_document(document: Mapping[str, Any]) -> HardwareClass:
    """The class of a result document: recomputed from its ``system`` section (so documents
    written before ``system.hardware_class`` existed have one too)."""
    return from_system(document.get("system") or {})


def _section(system: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = system.get(key)
    return value if isinstance(value, Mapping) else None


def _accelerator_name(accel: Mapping[str, Any]) -> str | None:
    tag = _text(accel.get("tag"))
    if tag:
        return tag
    name = _text(accel.get("name"))
    return name.lower() if name else None


def _gib(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return max(1, round(value / _GIB))


def _branch(version: Any) -> str | None:
    """The driver branch: ``550`` of ``550.54.15`` (a minor release does not change the class)."""
    text = _text(version)
    return text.split(".", 1)[0] if text else None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None
