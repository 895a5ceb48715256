"""A recording replay: answers pynvml calls from a recorded sampling session (tests only).

A recording (written by :mod:`cmx_core.telemetry.record`) is JSON::

    {"recorded_with": "...", "provenance": "...", "sample_period_ms": 100,
     "t_s": [0.0, 0.1, ...],                        # the sampler's clock at each call of it
     "calls": {"nvmlDeviceGetCount()": 1, "nvmlDeviceGetName(0)": "NVIDIA H200"},
     "series": {"nvmlDeviceGetPowerUsage(0)": [101470, ...], ...}}

``calls`` answer the same value every time; each ``series`` call answers its next recorded
value, in order, and raises :class:`ReplayExhausted` after the last (a replay never invents a
reading). A recorded ``{"error": "NVMLError_NotSupported", "message": ...}`` raises that
error; a call that was not recorded raises ``NVMLError_NotSupported``, as a driver that
lacks the query would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx_core.telemetry.nvml import call_key


class NvmlReplayError(Exception):
    """A recorded NVML error; ``name`` is the pynvml class (``NVMLError_NotSupported``)."""

    def __init__(self, name: str, message: str, value: int | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


class ReplayExhausted(Exception):
    """The replay was asked for more values than the recording holds."""


def _is_error(value: Any) -> bool:
    return isinstance(value, dict) and "error" in value and set(value) <= {"error", "message", "value"}


class NvmlRecordingReplay:
    """An :class:`cmx_core.telemetry.nvml.NvmlApi` that answers from a recording."""

    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self._calls: dict[str, Any] = dict(recording.get("calls") or {})
        self._series: dict[str, list[Any]] = {k: list(v) for k, v in (recording.get("series") or {}).items()}
        self._next: dict[str, int] = {}
        self._times = [float(t) for t in recording.get("t_s") or ()]
        init = self._calls.get("nvmlInit()")
        if isinstance(init, dict) and _is_error(init):
            raise self._error(init)

    @classmethod
    def from_file(cls, path: Path) -> NvmlRecordingReplay:
        data: dict[str, Any] = json.loads(Path(path).read_text())
        return cls(data)

    @staticmethod
    def _error(spec: dict[str, Any]) -> NvmlReplayError:
        return NvmlReplayError(str(spec["error"]), str(spec.get("message", spec["error"])), spec.get("value"))

    def _take(self, key: str, values: list[Any]) -> Any:
        n = self._next.get(key, 0)
        if n >= len(values):
            raise ReplayExhausted(f"recording replay: {key} has no value left ({len(values)} recorded)")
        self._next[key] = n + 1
        return values[n]

    def call(self, fn: str, *args: int) -> Any:
        key = call_key(fn, args)
        if key in self._series:
            value = self._take(key, self._series[key])
        elif key in self._calls:
            value = self._calls[key]
        else:
            raise NvmlReplayError("NVMLError_NotSupported", f"Not Supported (not recorded: {key})", 3)
        if _is_error(value):
            raise self._error(value)
        return value

    def clock(self) -> float:
        """The recorded sampler clock, one value per call (give it to the sampler as its clock)."""
        return float(self._take("t_s", self._times))

    def remaining(self, key: str) -> int:
        """How many recorded values of series ``key`` are still unread."""
        return len(self._series.get(key, ())) - self._next.get(key, 0)

    def close(self) -> None:
        pass
