"""AMD GPUs through the ``amdsmi`` Python module, else the ``amd-smi`` command line.

The module (shipped with ROCm, ``/opt/rocm/share/amd_smi``) is preferred: a call costs
microseconds. The CLI (``amd-smi metric --power --energy --usage --mem-usage --json``) starts
a Python process per round (about a second), so the sampler's period is then at least that.
Its JSON is a list of ``{"gpu": N, "power": {"socket_power": {"value": 139, "unit": "W"}},
"energy": {"total_energy_consumption": {"value": ..., "unit": "uJ"}}, ...}`` objects (newer
releases wrap it as ``{"gpu_data": [...]}``); ``"N/A"`` marks an unsupported value.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from cmx_core.telemetry.reading import Reading, Unavailable, one_line

CLI = "amd-smi"
CLI_ARGS = ("metric", "--power", "--energy", "--usage", "--mem-usage", "--json")
CLI_TIMEOUT_S = 10.0
_SCALE = {"w": 1.0, "mw": 1e-3, "uw": 1e-6, "µw": 1e-6, "j": 1.0, "mj": 1e-3, "uj": 1e-6, "µj": 1e-6,
          "mb": 1.0, "mib": 1.0, "gb": 1024.0, "gib": 1024.0, "b": 1.0 / (1024 * 1024), "%": 1.0}
#: Power keys by preference: MI300 reports current socket power, older parts an average.
_POWER_KEYS = ("socket_power", "current_socket_power", "average_socket_power")


def quantity(value: Any, default_unit: str) -> float | None:
    """``{"value": 139, "unit": "W"}``, a bare number or ``"N/A"`` -> a float in the base unit
    (W, J, MiB, %); amd-smi's ``MB`` are MiB (an MI300X's 192 GiB shows as 196592 MB)."""
    unit = default_unit
    if isinstance(value, dict):
        unit = str(value.get("unit") or default_unit)
        value = value.get("value")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    scale = _SCALE.get(unit.strip().lower())
    return None if scale is None else float(value) * scale


def _first(section: Any, keys: tuple[str, ...], unit: str) -> float | None:
    if not isinstance(section, dict):
        return None
    for key in keys:
        value = quantity(section.get(key), unit)
        if value is not None:
            return value
    return None


def parse_metric_json(text: str) -> tuple[Reading, ...]:
    """The readings in ``amd-smi metric ... --json`` output (one per GPU)."""
    data = json.loads(text)
    gpus = data.get("gpu_data", []) if isinstance(data, dict) else data
    out = []
    for entry in gpus if isinstance(gpus, list) else ():
        if not isinstance(entry, dict):
            continue
        out.append(Reading(
            f"gpu{entry.get('gpu')}",
            power_w=_first(entry.get("power"), _POWER_KEYS, "W"),
            energy_j=_first(entry.get("energy"), ("total_energy_consumption",), "uJ"),
            util_pct=_first(entry.get("usage"), ("gfx_activity",), "%"),
            mem_used_mib=_first(entry.get("mem_usage"), ("used_vram",), "MB")))
    return tuple(out)


class AmdSmiCli:
    """The ``amd-smi`` command (``path``: the executable; default: the one on PATH)."""

    name = "amd-smi"

    def __init__(self, path: str | None = None) -> None:
        self._path = path or shutil.which(CLI)
        if self._path is None:
            raise Unavailable("amd-smi: the amdsmi module is not importable and amd-smi is not on PATH")
        try:
            first = self.read()
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            raise Unavailable(f"amd-smi: {self._path} {' '.join(CLI_ARGS)} failed: {one_line(err)}") from None
        if not first:
            raise Unavailable("amd-smi: no AMD GPU in its output")
        self._devices = tuple(r.device for r in first)

    @property
    def devices(self) -> tuple[str, ...]:
        return self._devices

    def read(self) -> tuple[Reading, ...]:
        done = subprocess.run([str(self._path), *CLI_ARGS], capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_S, check=True)
        return parse_metric_json(done.stdout)

    def close(self) -> None:
        pass


class AmdSmiModule:
    """The ``amdsmi`` Python module (``module`` may be given; tests never need one)."""

    name = "amd-smi"

    def __init__(self, module: Any) -> None:
        self._smi = module
        try:
            module.amdsmi_init()
            self._handles = tuple(module.amdsmi_get_processor_handles())
        except Exception as err:  # noqa: BLE001 - AmdSmiException and driver errors alike
            raise Unavailable(f"amd-smi: amdsmi_init failed: {one_line(err)}") from None
        if not self._handles:
            raise Unavailable("amd-smi: amdsmi sees no AMD GPU")
        self._devices = tuple(f"gpu{i}" for i in range(len(self._handles)))

    @property
    def devices(self) -> tuple[str, ...]:
        return self._devices

    def _call(self, fn: str, handle: Any) -> Any:
        try:
            return getattr(self._smi, fn)(handle)
        except Exception:  # noqa: BLE001 - a query the part does not support reads as absent
            return None

    def _energy_j(self, handle: Any) -> float | None:
        count = self._call("amdsmi_get_energy_count", handle)
        if not isinstance(count, dict):
            return None
        raw = count.get("energy_accumulator", count.get("power"))
        resolution = count.get("counter_resolution")  # µJ per count
        if not isinstance(raw, (int, float)) or not isinstance(resolution, (int, float)):
            return None
        return float(raw) * float(resolution) / 1e6

    def read(self) -> tuple[Reading, ...]:
        out = []
        for device, handle in zip(self._devices, self._handles, strict=True):
            out.append(Reading(
                device, power_w=_first(self._call("amdsmi_get_power_info", handle), _POWER_KEYS, "W"),
                energy_j=self._energy_j(handle),
                util_pct=_first(self._call("amdsmi_get_gpu_activity", handle), ("gfx_activity",), "%"),
                mem_used_mib=_first(self._call("amdsmi_get_gpu_vram_usage", handle), ("vram_used",), "MB")))
        return tuple(out)

    def close(self) -> None:
        try:
            self._smi.amdsmi_shut_down()
        except Exception:  # noqa: BLE001 - closing never fails a run
            pass


def open_amd() -> AmdSmiModule | AmdSmiCli:
    """The module where it imports, else the CLI; :class:`Unavailable` when neither works."""
    try:
        # deferred: optional amdsmi, only when this runs
        import amdsmi  # type: ignore[import-not-found]
    except ImportError:
        return AmdSmiCli()
    return AmdSmiModule(amdsmi)
