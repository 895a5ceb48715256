"""NVIDIA GPUs through NVML (``pynvml``, distribution ``nvidia-ml-py``: the ``gpu`` extra).

Energy comes from ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded,
Volta and newer); where a device lacks it the sampler integrates ``nvmlDeviceGetPowerUsage``
(mW). Utilisation and memory feed the series. Every call goes through :meth:`NvmlApi.call`
with the pynvml function name and the device index, so a recording
(:class:`cmx_core.telemetry.replay.NvmlRecordingReplay`) can stand in for the library; the
call rendered as ``nvmlDeviceGetPowerUsage(0)`` is the recording's key.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

from cmx_core.telemetry.reading import (  # noqa: F401 - re-exported
    THROTTLING,
    Reading,
    Unavailable,
    one_line,
    require_nvidia_driver,
)

MIB = 1024 * 1024
#: The run sampler's extra calls: temperature (sensor 0, the GPU core) and throttle reasons.
TEMPERATURE = "nvmlDeviceGetTemperature"
TEMPERATURE_GPU = 0
THROTTLE_CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
#: The pynvml calls one sampling round makes per device (a recording keeps each as a series).
ROUND_CALLS = ("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerUsage",
               "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", TEMPERATURE, *THROTTLE_CALLS)


class NvmlApi(Protocol):
    def call(self, fn: str, *args: int) -> Any:
        """Call pynvml function ``fn``; an int argument in first place is a device index."""
        ...

    def close(self) -> None: ...


def call_key(fn: str, args: tuple[int, ...]) -> str:
    """The recording key of a call: ``nvmlDeviceGetPowerUsage(0)``."""
    return f"{fn}({','.join(str(a) for a in args)})"


def plain(value: Any) -> Any:
    """pynvml results as JSON data: bytes to str, ctypes structs to dicts, tuples to lists."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, ctypes.Structure):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class LiveNvml:
    """The real library. Raises :class:`Unavailable` when pynvml or the driver is missing."""

    def __init__(self) -> None:
        require_nvidia_driver()
        try:
            import pynvml  # deferred: optional pynvml, only when this runs
        except ImportError as err:
            raise Unavailable(f"NVML: pynvml is not importable ({err}; pip install nvidia-ml-py)") from None
        self._nvml: Any = pynvml
        self._handles: dict[int, Any] = {}
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise Unavailable(f"NVML: {one_line(err)}") from None

    def call(self, fn: str, *args: int) -> Any:
        if fn.startswith("nvmlDevice") and args:
            index = args[0]
            if index not in self._handles:
                self._handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
            return plain(getattr(self._nvml, fn)(self._handles[index], *args[1:]))
        return plain(getattr(self._nvml, fn)(*args))

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


def _field(value: Any, name: str) -> float | None:
    """A struct field of a plain()-ed result (a dict), or ``None``."""
    if isinstance(value, dict) and isinstance(value.get(name), (int, float)):
        return float(value[name])
    return None


class NvmlSource:
    """Every GPU NVML sees. ``api`` is :class:`LiveNvml` (default) or a recording replay."""

    name = "nvml"

    def __init__(self, api: NvmlApi | None = None) -> None:
        self._api = api if api is not None else LiveNvml()
        try:
            count = int(self._api.call("nvmlDeviceGetCount"))
        except Exception as err:  # noqa: BLE001 - any NVML failure makes the source unavailable
            self.close()
            raise Unavailable(f"NVML: {one_line(err)}") from None
        if count == 0:
            self.close()
            raise Unavailable("NVML: the driver sees no NVIDIA GPU")
        self._indices = tuple(range(count))
        self._counter = tuple(self._has_counter(i) for i in self._indices)
        self._devices = tuple(f"gpu{i}:{self._optional('nvmlDeviceGetName', i) or 'NVIDIA GPU'}"
                              for i in self._indices)

    @property
    def devices(self) -> tuple[str, ...]:
        return self._devices

    @property
    def has_counter(self) -> tuple[bool, ...]:
        """Per device: whether the total-energy counter exists (Volta and newer)."""
        return self._counter

    def _has_counter(self, index: int) -> bool:
        return self._optional("nvmlDeviceGetTotalEnergyConsumption", index) is not None

    def _optional(self, fn: str, index: int) -> Any:
        """A call whose failure (NotSupported on an older GPU) means "absent"."""
        try:
            return self._api.call(fn, index)
        except Exception:  # noqa: BLE001 - pynvml raises one NVMLError subclass per code
            return None

    def read(self) -> tuple[Reading, ...]:
        return tuple(self._read_one(i) for i in self._indices)

    def _read_one(self, index: int) -> Reading:
        energy = self._api.call("nvmlDeviceGetTotalEnergyConsumption", index) if self._counter[index] else None
        power = self._optional("nvmlDeviceGetPowerUsage", index)
        util = self._optional("nvmlDeviceGetUtilizationRates", index)
        memory = self._optional("nvmlDeviceGetMemoryInfo", index)
        used = _field(memory, "used")
        return Reading(self._devices[index],
                       power_w=None if power is None else float(power) / 1000.0,
                       energy_j=None if energy is None else float(energy) / 1000.0,
                       util_pct=_field(util, "gpu"),
                       mem_used_mib=None if used is None else used / MIB,
                       temperature_c=self._number(TEMPERATURE, index, TEMPERATURE_GPU),
                       throttle_reasons=self._throttle(index))

    def _number(self, fn: str, *args: int) -> float | None:
        try:
            value = self._api.call(fn, *args)
        except Exception:  # noqa: BLE001 - NotSupported on this part: absent, never invented
            return None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _throttle(self, index: int) -> int | None:
        for fn in THROTTLE_CALLS:  # the new name (driver 535+) first, then the deprecated one
            value = self._number(fn, index)
            if value is not None:
                return int(value)
        return None

    def close(self) -> None:
        try:
            self._api.close()
        except Exception:  # noqa: BLE001 - closing never fails a run
            pass
