"""The energy a node used over a timed window, where the machine exposes it: NVML's total
energy counter of every visible GPU (``device cuda``), else the RAPL package counters under
``/sys/class/powercap`` (the CPU). One rank per node (local rank 0) reads it, so ranks that
share a node do not count it twice. Elsewhere the reading is ``None`` with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")


def _rapl() -> list[Path]:
    return sorted(p / "energy_uj" for p in POWERCAP.glob("intel-rapl:[0-9]*") if (p / "energy_uj").is_file()
                  and ":" not in p.name.split("intel-rapl:", 1)[1])


class Meter:
    def __init__(self, device: str) -> None:
        self.source = "unavailable"
        self.reason = ""
        self._start: float | None = None
        self._nvml: Any = None
        if device == "cuda":
            try:
                # deferred: optional pynvml, only when this runs
                import pynvml  # type: ignore[import-not-found,unused-ignore]

                pynvml.nvmlInit()
                self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
                self._nvml = pynvml
                self.source = "nvml"
            except Exception as exc:  # noqa: BLE001 - no NVML is a reason, not an error
                self.reason = f"NVML: {type(exc).__name__}: {exc}"
        if self.source == "unavailable":
            files = _rapl()
            readable = [f for f in files if _readable(f)]
            if readable:
                self._files, self.source = readable, "rapl"
            else:
                self.reason = self.reason or ("no RAPL counters under /sys/class/powercap" if not files
                                              else "RAPL counters are not readable")

    def _read_j(self) -> float:
        if self.source == "nvml":
            return float(sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles)) / 1e3  # mJ
        return sum(int(f.read_text()) for f in self._files) / 1e6  # uJ (wrap-around ignored: short windows)

    def start(self) -> None:
        if self.source != "unavailable":
            self._start = self._read_j()

    def stop(self) -> float | None:
        if self._start is None:
            return None
        used = self._read_j() - self._start
        return used if used > 0 else None


def _readable(path: Path) -> bool:
    try:
        int(path.read_text())
        return True
    except (OSError, ValueError):
        return False
