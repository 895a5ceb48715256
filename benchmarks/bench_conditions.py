"""The cost a measured run pays for its ``conditions`` section (docs/busy-machine.md): one
:class:`~cmx_core.conditions.window.MeasuredWindow` opened and finished (two snapshots of a
few dozen procfs/sysfs files, NVML where present, and the judged record), timed over rounds.
Prints min, median and max in milliseconds.

    .venv/bin/python benchmarks/bench_conditions.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cmx_core.conditions.window import MeasuredWindow


def one_window() -> float:
    started = time.perf_counter()
    MeasuredWindow.start().finish({}).to_json()
    return (time.perf_counter() - started) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    one_window()  # first use: imports and NVML's library search
    times = sorted(one_window() for _ in range(args.rounds))
    print(f"conditions window: min {times[0]:.2f} ms, median {statistics.median(times):.2f} ms, "
          f"max {times[-1]:.2f} ms over {args.rounds} rounds")


if __name__ == "__main__":
    main()
