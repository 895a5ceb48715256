"""Benchmarks of cmx-docker (prints numbers; asserts nothing about time).

1. Time to decide "no rebuild needed" for an unchanged template (target < 100 ms, and no
   call to the engine's build): in a fresh process including the plugin's imports, and
   warm in-process.
2. First build time of each template here (``rebuild=True``: without the engine's layer
   cache; host-side wheels/wheelhouse already cached after the first run).
3. Overhead of running ``detect,os`` in a container versus on the host.
4. ``--main``: the main job (``mlperf,inference,llama`` on the CPU, the recipe
   ``scripts/benchmark.sh`` runs; a short Offline run by default) on the host and under
   ``--container``, alternately, ``--runs`` times each: every run's wall time and validity,
   and each container run's overhead split into the image check (content-digest look-up and
   label check), the container start (create + start + limits read back), the container's
   run (until it exits: the inner cmx's start-up plus the job, whose own wall time the inner
   result gives) and the host-side rest (plan, lock, fold, hand-back). A run that is not
   VALID is printed as such, never dropped. ``--one host|container`` runs the job once, for
   an external whole-process timer that alternates the two (the ratio to quote).

Usage (an engine must be reachable, e.g. after ``source scripts/services/docker.sh &&
cmx_docker_start "$W"``; the base image must exist: ``cmx run recipe
--tags=debootstrap,base-image``)::

    .venv/bin/python benchmarks/bench_docker.py [--templates python,cpu-torch] [--runs 5]
    .venv/bin/python benchmarks/bench_docker.py --main --runs 3

CMX_HOME defaults to a temporary directory so the benchmark leaves your cache alone (give
one that already holds the cpu-torch image's wheelhouse to skip its first build).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

MAIN = "mlperf,inference,llama"
MAIN_INPUTS: dict[str, Any] = {"scenario": "Offline", "duration_s": 2}

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


@contextmanager
def phases(into: dict[str, float]) -> Iterator[None]:
    """Time the docker executor's image check, container start and container run (wrapping
    the functions it calls) into ``into``."""
    import importlib

    executor: Any = importlib.import_module("cmx_docker.executor")
    saved = (executor.ensure_image, executor.start_container, executor.DockerExecutor.wait)

    def timed(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                into[key] = into.get(key, 0.0) + time.perf_counter() - t0
        return wrapper

    executor.ensure_image = timed("image_check", saved[0])
    executor.start_container = timed("start", saved[1])
    executor.DockerExecutor.wait = timed("container_run", saved[2])
    try:
        yield
    finally:
        executor.ensure_image, executor.start_container, executor.DockerExecutor.wait = saved


def one_main(where: str) -> tuple[float, str, dict[str, float]]:
    """(wall s, validity, phases) of one main-job run on the host or in its container."""
    import json

    from cmx_core.api import run

    split: dict[str, float] = {}
    t0 = time.perf_counter()
    with phases(split):
        result = run(MAIN, inputs=MAIN_INPUTS, executor="docker" if where == "container" else "local",
                     use_cache=True)
    wall = time.perf_counter() - t0
    doc = result.document
    validity = str((doc.get("mlperf") or {}).get("result_validity") or f"status {doc.get('status')}")
    if where == "container":
        inner = result.run_dir / "remote" / "result.json"
        if inner.is_file():
            split["inner_job"] = float(json.loads(inner.read_text())["timing"]["wall_s"])
    return wall, validity, split


def main_job(runs: int) -> None:
    """Host and container runs of the main job, alternately, with the container's split."""
    one_main("container")  # image built (or checked), model built and cached: not counted
    one_main("host")
    host: list[float] = []
    inside: list[float] = []
    for index in range(runs):
        h, h_valid, _ = one_main("host")
        c, c_valid, split = one_main("container")
        host.append(h)
        inside.append(c)
        rest = c - sum(split.get(k, 0.0) for k in ("image_check", "start", "container_run"))
        print(f"main job run {index + 1}: host {h:.2f} s {h_valid}; container {c:.2f} s {c_valid}; "
              f"overhead {c - h:+.2f} s = image check {split.get('image_check', 0.0):.3f} s + container start "
              f"{split.get('start', 0.0):.3f} s + in-container run {split.get('container_run', 0.0):.2f} s "
              f"(the job itself {split.get('inner_job', float('nan')):.2f} s of it) + host-side rest {rest:.2f} s "
              f"- host run {h:.2f} s", flush=True)
    hm, cm = statistics.median(host), statistics.median(inside)
    print(f"main job {MAIN} {MAIN_INPUTS}: host median {hm:.2f} s, container median {cm:.2f} s, "
          f"overhead median {cm - hm:+.2f} s ({runs} alternating runs each)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", default="python", help="templates to build (comma list)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--main", action="store_true", help="only the main job, host vs container")
    parser.add_argument("--one", choices=("host", "container"), help="run the main job once there and exit")
    args = parser.parse_args()
    if "CMX_HOME" not in os.environ:
        os.environ["CMX_HOME"] = tempfile.mkdtemp(prefix="cmx-bench-")
    if args.one:
        wall, validity, split = one_main(args.one)
        print(f"main job on {args.one}: {wall:.2f} s {validity} {split}")
        return 0 if validity == "VALID" else 1
    if args.main:
        main_job(args.runs)
        return 0
    names = [n for n in args.templates.split(",") if n]
    first_builds(names)
    decide(names[0], args.runs)
    overhead(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
