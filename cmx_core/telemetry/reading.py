"""What a power source reports each sampling round, and the protocol every backend meets."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol


class Unavailable(Exception):
    """A power source cannot be used on this machine; the message is one line naming the
    source and why (``NVML: pynvml is not importable``)."""


NVIDIA_DRIVER = ("/proc/driver/nvidia", "/dev/nvidiactl")
"""What the NVIDIA kernel driver makes: without either, NVML has no GPU to see."""


def require_nvidia_driver() -> None:
    """Unavailable where the NVIDIA driver is absent, before pynvml is imported (12 ms of
    every run's start on a machine without a GPU, for an nvmlInit that would fail)."""
    if not any(os.path.exists(path) for path in NVIDIA_DRIVER):
        raise Unavailable(f"NVML: no NVIDIA driver on this machine ({' and '.join(NVIDIA_DRIVER)} are absent)")


THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""The clock-throttle reasons that slow a busy GPU: software power cap, hardware slowdown,
software and hardware thermal slowdown, power brake (idle and application-clock settings are
not). NVML's ``nvmlClocksEventReason*`` bits."""


@dataclass(frozen=True)
class Reading:
    """One device at one instant. ``energy_j`` is the device's cumulative energy counter
    (any origin; only differences mean anything), ``None`` where the device has none."""

    device: str
    power_w: float | None = None
    energy_j: float | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    temperature_c: float | None = None
    throttle_reasons: int | None = None
    """The device's clock-throttle reasons bitmask (NVML's ``ClocksEventReasons``), ``None``
    where the backend has none."""


class PowerSource(Protocol):
    """A backend. :meth:`read` is called from the sampler thread every period; it may raise
    (the sampler then stops and says why). ``name`` is ``nvml``, ``amd-smi`` or ``rapl``."""

    name: str

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices each :meth:`read` reports, in order."""
        ...

    def read(self) -> tuple[Reading, ...]:
        """One reading per device."""
        ...

    def close(self) -> None:
        """Release the library (``nvmlShutdown``); never raises."""
        ...


def one_line(error: BaseException) -> str:
    """An exception as one line: ``NVMLError_NotSupported: Not Supported``."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
