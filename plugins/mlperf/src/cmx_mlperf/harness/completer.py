"""The :class:`~cmx_mlperf.sut.Completer` the child process hands to the SUT.

It forwards completions to LoadGen (``QuerySamplesComplete`` / ``FirstTokenComplete``), or,
while :mod:`cmx_mlperf.harness.calibrate` measures the SUT before the test, only counts
them. The methods never change identity (SUTs may cache them); a flag picks the mode.

Buffer lifetime (workloads.md §1.3 item 2): LoadGen reads the response bytes inside
``QuerySamplesComplete``; the ``data`` argument stays referenced by this frame until the call
returns, which is all LoadGen needs.

``complete_many(response_ids, data)`` is a harness extension beyond the SUT contract: it
completes many ids with the same bytes in one LoadGen call (used by the no-op SUT).

While the test's live progress is on (:mod:`cmx_mlperf.harness.live`), what it forwarded to
LoadGen is tallied after the LoadGen call: one ``deque.append`` per call (per batch for
``complete_many``; a deque's appends and pops are thread-safe without a lock), drained by the
progress thread each second. With the progress off, the cost is one flag check.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections import deque
from typing import Any


def _cast_address(data: bytes) -> int | None:
    """``ctypes.cast`` of ``bytes`` to ``c_void_p``: the address of its payload."""
    # ctypes passes a bytes object as a char pointer to its payload; typeshed leaves bytes
    # out of cast()'s argument types.
    return ctypes.cast(data, ctypes.c_void_p).value  # type: ignore[arg-type]


def _payload_offset() -> int | None:
    """Offset of a ``bytes`` payload from ``id()`` (CPython stores it inline), checked on
    two objects; None on an interpreter where that does not hold."""
    probes = (b"probe-a", bytes(range(40)))
    offsets = set()
    for p in probes:
        address = _cast_address(p)
        if address is None:  # not for non-empty bytes; no offset to trust if it were
            return None
        offsets.add(address - id(p))
    return offsets.pop() if len(offsets) == 1 and sys.implementation.name == "cpython" else None


_BYTES_OFFSET = _payload_offset()


def _address(data: bytes) -> int:
    """Address of a ``bytes`` object's payload, without a ctypes call on the hot path."""
    if not data:
        return 0
    if _BYTES_OFFSET is None:
        return _cast_address(data) or 0
    return id(data) + _BYTES_OFFSET


def _as_bytes(data: Any) -> bytes:
    return data if type(data) is bytes else bytes(data)


class LoadgenCompleter:
    """Thread-safe completer; forwards to LoadGen unless :meth:`count_only` is active.

    Its methods stay the same objects in both modes, so a SUT may cache them (the no-op SUT
    binds ``complete_many`` once); the mode is a flag checked on each call.
    """

    def __init__(self) -> None:
        import mlperf_loadgen as lg  # deferred: mlperf_loadgen only when this runs (1 module)

        self._lg = lg
        self._lock = threading.Lock()
        self._count = 0
        self._target = 0
        self._reached = threading.Event()
        self._counting = [False]  # a cell the complete_many closure reads
        self._tallying = [False]  # a cell: the live progress is on
        self._samples: deque[int] = deque()
        self._tokens: deque[int] = deque()
        self._totals = [0, 0]  # samples, tokens drained so far (the progress thread's)
        self.complete_many = self._make_complete_many()

    def to_loadgen(self) -> None:
        self._counting[0] = False

    def count_only(self) -> None:
        """Count completions instead of reporting them (LoadGen is not running). The
        counting path builds the same response objects as the LoadGen path, so that a
        calibration of a very fast SUT includes the per-sample cost of reporting."""
        self._counting[0] = True

    def complete(self, response_id: int, data: bytes, n_tokens: int | None = None) -> None:
        data = _as_bytes(data)
        lg = self._lg
        if n_tokens is None:
            response = lg.QuerySampleResponse(response_id, _address(data), len(data))
        else:
            response = lg.QuerySampleResponse(response_id, _address(data), len(data), n_tokens)
        if self._counting[0]:
            self._add(1)
        else:
            lg.QuerySamplesComplete([response])
            if self._tallying[0]:
                self._samples.append(1)
                if n_tokens:
                    self._tokens.append(n_tokens)

    def first_token(self, response_id: int, data: bytes) -> None:
        if self._counting[0]:
            return
        data = _as_bytes(data)
        lg = self._lg
        lg.FirstTokenComplete([lg.QuerySampleResponse(response_id, _address(data), len(data))])

    def _make_complete_many(self) -> Any:
        """``complete_many(response_ids, data=b"")`` as a closure over LoadGen's functions:
        the no-op SUT's whole per-query cost, so no attribute lookups on its path."""
        response, complete, counting, add, tallying, samples = (
            self._lg.QuerySampleResponse, self._lg.QuerySamplesComplete, self._counting, self._add,
            self._tallying, self._samples)

        def complete_many(response_ids: list[int], data: bytes = b"") -> None:
            if data:
                data = _as_bytes(data)
                address, size = _address(data), len(data)
            else:
                address = size = 0
            responses = [response(i, address, size) for i in response_ids]
            if counting[0]:
                add(len(responses))
            else:
                complete(responses)
                if tallying[0]:
                    samples.append(len(responses))

        return complete_many

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

    def tally(self, on: bool) -> None:
        """Start (or stop) tallying what is completed to LoadGen, from zero when started."""
        if on:
            self._samples.clear()
            self._tokens.clear()
            self._totals = [0, 0]
        self._tallying[0] = on

    def completed(self) -> tuple[int, int]:
        """Samples and tokens completed to LoadGen since :meth:`tally` started (one reader:
        the progress thread)."""
        for index, queue in enumerate((self._samples, self._tokens)):
            while queue:
                self._totals[index] += queue.popleft()
        return self._totals[0], self._totals[1]

    def _add(self, n: int) -> None:
        with self._lock:
            self._count += n
            if self._count >= self._target:
                self._reached.set()
