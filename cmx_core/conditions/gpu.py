"""GPU clock-throttle reasons and persistence mode through NVML (the telemetry package's
:class:`~cmx_core.telemetry.nvml.NvmlSource`). On a recorded tree (a root other than ``/``)
the tree's ``nvml.json`` recording stands in for the library; without one, unknown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.conditions.values import Read, known, unknown
from cmx_core.telemetry.nvml import LiveNvml, NvmlApi, NvmlSource
from cmx_core.telemetry.reading import THROTTLING, Unavailable, one_line
from cmx_core.telemetry.replay import NvmlRecordingReplay

RECORDING = "nvml.json"
"""An NVML recording (:mod:`cmx_core.telemetry.replay`) at the top of a recorded tree."""
REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "power_brake"}
"""The throttling bits of :data:`~cmx_core.telemetry.reading.THROTTLING`, named."""


@dataclass(frozen=True)
class GpuState:
    device: str
    throttle: tuple[str, ...]
    """The throttling reasons active when read (empty: clocks not held down)."""
    persistence: bool | None
    """Persistence mode (None: not reported)."""

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "throttle": list(self.throttle), "persistence": self.persistence}


def reason_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in REASONS.items() if mask & bit & THROTTLING)


def gpus(root: Path, api: NvmlApi | None = None) -> Read[tuple[GpuState, ...]]:
    """Every NVIDIA GPU's throttle reasons and persistence mode; unknown with NVML's reason
    when there is no driver, no pynvml or no GPU."""
    try:
        chosen = api if api is not None else _api(root)
        source = NvmlSource(chosen)
    except Unavailable as err:
        return unknown(str(err))
    try:
        readings = source.read()
        return known(tuple(GpuState(r.device, reason_names(r.throttle_reasons or 0), _persistence(chosen, i))
                           for i, r in enumerate(readings)))
    except Exception as err:  # noqa: BLE001 - an NVML failure mid-read: unknown, never a guess
        return unknown(f"NVML: {one_line(err)}")
    finally:
        source.close()


def _api(root: Path) -> NvmlApi:
    if root == Path("/"):
        return LiveNvml()
    recording = root / RECORDING
    if not recording.is_file():
        raise Unavailable(f"NVML: no {RECORDING} recording in {root}")
    try:
        return NvmlRecordingReplay.from_file(recording)
    except Exception as err:  # noqa: BLE001 - a recording of a failed nvmlInit raises its error
        raise Unavailable(f"NVML: {one_line(err)}") from None


def _persistence(api: NvmlApi, index: int) -> bool | None:
    try:
        return bool(api.call("nvmlDeviceGetPersistenceMode", index))
    except Exception:  # noqa: BLE001 - NotSupported (not on every part or driver): not reported
        return None
