"""``python -m cmx_core.telemetry.record OUT.json --seconds N``: record a real NVML sampling session.

Runs the sampler for ``N`` seconds on this machine's NVIDIA GPUs through the real library and
writes every pynvml call it made, with the sampler's clock, in the format
:class:`cmx_core.telemetry.replay.NvmlRecordingReplay` reads: the calls of a sampling round
(:data:`cmx_core.telemetry.nvml.ROUND_CALLS`) as ``series`` in call order, the rest as ``calls``.
Replaying the file through the same sampler gives the same joules (a test checks this on the
recorded fixtures). Put load on the GPU meanwhile to record a busy series.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

from cmx_core.telemetry.energy import DEFAULT_PERIOD_MS, summarize
from cmx_core.telemetry.nvml import ROUND_CALLS, LiveNvml, NvmlApi, NvmlSource, call_key
from cmx_core.telemetry.reading import Unavailable, one_line
from cmx_core.telemetry.sampler import PowerSampler


class RecordingNvml:
    """Wraps an :class:`NvmlApi` and writes down every answer (errors too)."""

    def __init__(self, inner: NvmlApi) -> None:
        self._inner = inner
        self.calls: dict[str, Any] = {"nvmlInit()": None}
        self.series: dict[str, list[Any]] = {}

    def _keep(self, fn: str, key: str, value: Any) -> None:
        if fn in ROUND_CALLS:
            self.series.setdefault(key, []).append(value)
        else:
            self.calls[key] = value

    def call(self, fn: str, *args: int) -> Any:
        key = call_key(fn, args)
        try:
            value = self._inner.call(fn, *args)
        except Exception as err:  # the recording keeps the error, then re-raises it
            self._keep(fn, key, {"error": type(err).__name__, "message": str(err),
                                 "value": getattr(err, "value", None)})
            raise
        self._keep(fn, key, value)
        return value

    def close(self) -> None:
        self._inner.close()


class RecordingClock:
    """``time.monotonic`` that keeps every value it returned."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self._t0 = time.monotonic()

    def __call__(self) -> float:
        self.values.append(round(time.monotonic() - self._t0, 6))
        return self.values[-1]


def record(seconds: float, period_ms: float, api: NvmlApi | None = None) -> dict[str, Any]:
    """Sample for ``seconds``; the recording as a JSON-able dict."""
    recorder = RecordingNvml(api if api is not None else LiveNvml())
    clock = RecordingClock()
    source = NvmlSource(recorder)
    sampler = PowerSampler(source, period_ms / 1000.0, clock)
    sampler.start()
    time.sleep(seconds)
    session = sampler.stop()
    source.close()
    return {
        "recorded_with": "python -m cmx_core.telemetry.record (pynvml calls of cmx_core.telemetry.nvml.NvmlSource)",
        "provenance": f"recorded on {socket.gethostname()} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        "sample_period_ms": period_ms,
        "t_s": clock.values,
        "calls": recorder.calls,
        "series": recorder.series,
        "summary": summarize(session).as_dict(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cmx_core.telemetry.record", description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the recording to write (JSON)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to sample (default 5)")
    parser.add_argument("--period-ms", type=float, default=DEFAULT_PERIOD_MS, help="sampling period (default 100)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.period_ms <= 0:
        print("record: --seconds and --period-ms must be > 0", file=sys.stderr)
        return 2
    try:
        data = record(args.seconds, args.period_ms)
    except Unavailable as err:
        print(f"record: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - one line, not a traceback
        print(f"record: {one_line(err)}", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    summary = data["summary"]
    print(f"{args.out}: {summary['samples']} rounds, energy_j={summary['energy_j']}, "
          f"avg_power_w={summary['avg_power_w']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
