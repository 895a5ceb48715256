"""The :class:`~cmx_mlperf.sut.Completer` the child process hands to the SUT.

It forwards completions to LoadGen (``QuerySamplesComplete`` / ``FirstTokenComplete``), or,
while :mod:`cmx_mlperf.harness.calibrate` measures the SUT before the test, only counts
them. The active path is swapped by rebinding the instance's ``complete`` / ``first_token``
/ ``complete_many`` attributes, so the hot path has no mode check.

Buffer lifetime (workloads.md §1.3 item 2): LoadGen reads the response bytes inside
``QuerySamplesComplete``; the ``data`` argument stays referenced by this frame until the call
returns, which is all LoadGen needs.

``complete_many(response_ids, data)`` is a harness extension beyond the SUT contract: it
completes many ids with the same bytes in one LoadGen call (used by the no-op SUT).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any



def _payload_offset() -> int | None:
    """Offset of a ``bytes`` payload from ``id()`` (CPython stores it inline), checked on
    two objects; None on an interpreter where that does not hold."""
    probes = (b"probe-a", bytes(range(40)))
    offsets = {ctypes.cast(p, ctypes.c_void_p).value - id(p) for p in probes}  # type: ignore[operator]
    return offsets.pop() if len(offsets) == 1 and sys.implementation.name == "cpython" else None


_BYTES_OFFSET = _payload_offset()


def _address(data: bytes) -> int:
    """Address of a ``bytes`` object's payload, without a ctypes call on the hot path."""
    if not data:
        return 0
    if _BYTES_OFFSET is None:
        return ctypes.cast(data, ctypes.c_void_p).value or 0
    return id(data) + _BYTES_OFFSET


def _as_bytes(data: Any) -> bytes:
    return data if type(data) is bytes else bytes(data)


def _loadgen_complete_many(lg: Any) -> Any:
    """``complete_many`` as a closure over LoadGen's functions: the no-op SUT's whole
    per-query cost, so it avoids attribute lookups and, for empty data, any conversion."""
    response, complete = lg.QuerySampleResponse, lg.QuerySamplesComplete

    def complete_many(response_ids: list[int], data: bytes = b"") -> None:
        if not data:
            complete([response(i, 0, 0) for i in response_ids])
            return
        data = _as_bytes(data)
        address, size = _address(data), len(data)
        complete([response(i, address, size) for i in response_ids])

    return complete_many


class LoadgenCompleter:
    """Thread-safe completer; starts in LoadGen mode (see :meth:`count_only`)."""

    def __init__(self) -> None:
        import mlperf_loadgen as lg

        self._lg = lg
        self._lock = threading.Lock()
        self._count = 0
        self._target = 0
        self._reached = threading.Event()
        self.to_loadgen()

    # -- LoadGen mode -------------------------------------------------------------------
    def to_loadgen(self) -> None:
        self.complete = self._lg_complete
        self.first_token = self._lg_first_token
        self.complete_many = self._lg_complete_many

    def _lg_complete(self, response_id: int, data: bytes, n_tokens: int | None = None) -> None:
        data = _as_bytes(data)
        lg = self._lg
        if n_tokens is None:
            response = lg.QuerySampleResponse(response_id, _address(data), len(data))
        else:
            response = lg.QuerySampleResponse(response_id, _address(data), len(data), n_tokens)
        lg.QuerySamplesComplete([response])

    def _lg_first_token(self, response_id: int, data: bytes) -> None:
        data = _as_bytes(data)
        lg = self._lg
        lg.FirstTokenComplete([lg.QuerySampleResponse(response_id, _address(data), len(data))])

    @property
    def _lg_complete_many(self) -> Any:
        return _loadgen_complete_many(self._lg)

    # -- counting mode (calibration) ---------------------------------------------------
    def count_only(self) -> None:
        """Count completions instead of reporting them (LoadGen is not running)."""
        self.complete = self._count_complete
        self.first_token = self._count_first_token
        self.complete_many = self._count_many

    def expect(self, total: int) -> threading.Event:
        """Arm the event that is set once ``total`` completions have been counted."""
        with self._lock:
            self._target = total
            self._reached.clear()
            if self._count >= total:
                self._reached.set()
        return self._reached

    @property
    def count(self) -> int:
        return self._count

    def _add(self, n: int) -> None:
        with self._lock:
            self._count += n
            if self._count >= self._target:
                self._reached.set()

    # The counting path builds the same response objects as the LoadGen path, so that a
    # calibration of a very fast SUT includes the per-sample cost of reporting completions.
    def _count_complete(self, response_id: int, data: bytes, n_tokens: int | None = None) -> None:
        data = _as_bytes(data)
        self._lg.QuerySampleResponse(response_id, _address(data), len(data))
        self._add(1)

    def _count_first_token(self, response_id: int, data: bytes) -> None:
        return None

    def _count_many(self, response_ids: list[int], data: bytes = b"") -> None:
        data = _as_bytes(data)
        address, size, response = _address(data), len(data), self._lg.QuerySampleResponse
        self._add(len([response(i, address, size) for i in response_ids]))
