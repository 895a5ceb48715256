"""NVML access through one narrow interface, so a recording can stand in for the library.

Every NVML query cmx-detect makes goes through :meth:`NvmlSession.call` with the pynvml
function name and plain arguments; a device is named by a path string (``"0"`` for GPU 0,
``"0/mig1"`` for its MIG device 1) instead of a ctypes handle. The same call rendered as
``nvmlDeviceGetName(0)`` is the key of a recording (``nvml.json`` in a fixture), which is
why the live path and the replay path share all parsing code.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol


class NvmlCallError(Exception):
    """An NVML call failed; ``name`` is the pynvml exception class (``NVMLError_NotSupported``)."""

    def __init__(self, name: str, message: str, value: int | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


class NvmlSession(Protocol):
    def call(self, fn: str, *args: int | str) -> Any:
        """Call pynvml function ``fn``; device paths in ``args`` stand for handles."""

    def close(self) -> None: ...


def call_key(fn: str, args: tuple[int | str, ...]) -> str:
    """The recording key of a call: ``nvmlDeviceGetMaxClockInfo(0,1)``."""
    return f"{fn}({','.join(str(a) for a in args)})"


def normalise(value: Any) -> Any:
    """pynvml results as JSON data: bytes to str, ctypes structs to dicts, tuples to lists."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, ctypes.Structure):
        return {name: normalise(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    return value


class LiveNvml:
    """The real NVML library through the ``pynvml`` module (distribution ``nvidia-ml-py``)."""

    def __init__(self) -> None:
        try:
            import pynvml  # deferred: optional pynvml, only when this runs
        except ImportError as err:
            raise NvmlCallError("ImportError", f"pynvml not importable: {err}") from None
        self._nvml = pynvml
        self._handles: dict[str, Any] = {}
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise NvmlCallError(type(err).__name__, str(err), getattr(err, "value", None)) from None

    def _handle(self, path: str) -> Any:
        if path not in self._handles:
            parent, _, mig = path.partition("/mig")
            if mig:
                self._handles[path] = self._nvml.nvmlDeviceGetMigDeviceHandleByIndex(
                    self._handle(parent), int(mig))
            else:
                self._handles[path] = self._nvml.nvmlDeviceGetHandleByIndex(int(path))
        return self._handles[path]

    def call(self, fn: str, *args: int | str) -> Any:
        nvml = self._nvml
        try:
            if fn == "nvmlDeviceGetMigDeviceHandleByIndex":
                path = f"{args[0]}/mig{args[1]}"
                self._handle(path)
                return path
            real = [self._handle(a) if isinstance(a, str) else a for a in args]
            return normalise(getattr(nvml, fn)(*real))
        except nvml.NVMLError as err:
            raise NvmlCallError(type(err).__name__, str(err), getattr(err, "value", None)) from None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


class RecordingNvml:
    """Wraps a session and records every call's answer (for ``cmx detect --record``)."""

    def __init__(self, inner: NvmlSession, calls: dict[str, Any]) -> None:
        self._inner = inner
        self.calls = calls

    def call(self, fn: str, *args: int | str) -> Any:
        key = call_key(fn, args)
        try:
            value = self._inner.call(fn, *args)
        except NvmlCallError as err:
            self.calls[key] = {"error": err.name, "message": str(err), "value": err.value}
            raise
        self.calls[key] = value
        return value

    def close(self) -> None:
        self._inner.close()


class RecordedNvml:
    """Answers calls from a recording (``{"calls": {"nvmlDeviceGetName(0)": "...", ...}}``).

    A recorded ``{"error": "NVMLError_NotSupported", "message": ...}`` raises that error; a
    call that was not recorded raises ``NVMLError_NotSupported`` too, as a driver that lacks
    the query would.
    """

    def __init__(self, calls: dict[str, Any]) -> None:
        self._calls = calls
        init = calls.get("nvmlInit()")
        if isinstance(init, dict) and "error" in init:
            raise self._error(init)

    @staticmethod
    def _error(spec: dict[str, Any]) -> NvmlCallError:
        return NvmlCallError(str(spec["error"]), str(spec.get("message", spec["error"])),
                             spec.get("value"))

    def call(self, fn: str, *args: int | str) -> Any:
        key = call_key(fn, args)
        if key not in self._calls:
            raise NvmlCallError("NVMLError_NotSupported", f"Not Supported (not recorded: {key})", 3)
        value = self._calls[key]
        if isinstance(value, dict) and set(value) >= {"error"} and len(value) <= 3:
            raise self._error(value)
        return value

    def close(self) -> None:
        pass
