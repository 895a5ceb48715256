"""Benchmarks of cmx-docker (prints numbers; asserts nothing about time).

1. Time to decide "no rebuild needed" for an unchanged template (target < 100 ms, and no
   call to the engine's build): in a fresh process including the plugin's imports, and
   warm in-process.
2. First build time of each template here (``rebuild=True``: without the engine's layer
   cache; host-side wheels/wheelhouse already cached after the first run).
3. Overhead of running ``detect,os`` in a container versus on the host.

Usage (an engine must be reachable, e.g. after ``source scripts/services/docker.sh &&
cmx_docker_start "$W"``; the base image must exist: ``cmx run recipe
--tags=debootstrap,base-image``)::

    .venv/bin/python benchmarks/bench_docker.py [--templates python,cpu-torch] [--runs 5]

CMX_HOME defaults to a temporary directory so the benchmark leaves your cache alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

DECIDE_SNIPPET = """
import time, sys
import cmx_core.api
t0 = time.perf_counter()
from cmx_docker.build import ensure_image
record = ensure_image(sys.argv[1])
print(f"{(time.perf_counter() - t0) * 1e3:.1f} {record.built} {'docker' in sys.modules}")
"""


def decide(template: str, runs: int) -> None:
    from cmx_docker.build import ensure_image

    ensure_image(template)  # make sure it exists
    cold = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", DECIDE_SNIPPET, template], capture_output=True,
                             text=True, check=True).stdout.split()
        cold.append(float(out[0]))
        assert out[1] == "False", "an unchanged template was rebuilt"
    warm = []
    for _ in range(runs):
        t0 = time.perf_counter()
        record = ensure_image(template)
        warm.append((time.perf_counter() - t0) * 1e3)
        assert not record.built
    print(f"decide no-rebuild [{template}]: fresh process (incl. plugin imports, SDK not imported: "
          f"{out[2] == 'False'}) median {statistics.median(cold):.1f} ms (min {min(cold):.1f}); "
          f"warm median {statistics.median(warm):.1f} ms; engine build calls: 0")


def first_builds(names: list[str]) -> None:
    from cmx_docker.build import ensure_image

    for name in names:
        ensure_image(name)  # host-side wheels and wheelhouse in place
        t0 = time.perf_counter()
        record = ensure_image(name, rebuild=True)
        print(f"first build [{name}]: {time.perf_counter() - t0:.1f} s (engine build {record.build_s:.1f} s), "
              f"image {record.tag} {record.image_id[:19]}")


def overhead(runs: int) -> None:
    from cmx_core.api import run

    run("detect,os", executor="docker")  # image built, caches warm
    for use_cache in (True, False):
        host, inside = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            run("detect,os", use_cache=use_cache)
            host.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run("detect,os", executor="docker", use_cache=use_cache)
            inside.append(time.perf_counter() - t0)
        h, c = statistics.median(host), statistics.median(inside)
        print(f"detect,os ({'cache' if use_cache else 'no cache'}): host median {h * 1e3:.0f} ms, "
              f"container median {c * 1e3:.0f} ms, overhead {(c - h) * 1e3:.0f} ms ({runs} runs each)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", default="python", help="templates to build (comma list)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if "CMX_HOME" not in os.environ:
        os.environ["CMX_HOME"] = tempfile.mkdtemp(prefix="cmx-bench-")
    names = [n for n in args.templates.split(",") if n]
    first_builds(names)
    decide(names[0], args.runs)
    overhead(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
