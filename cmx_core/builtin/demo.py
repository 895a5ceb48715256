"""Step functions of the demo chain (``recipes/demo``): a deterministic data set and a
small sorting benchmark. They show deps, a variation group, a ``when`` condition and
caching with real work, and need nothing beyond the standard library."""

from __future__ import annotations

import heapq
import random
import struct
import time
from pathlib import Path

from cmx_core.providers.types import StepContext
from cmx_core.providers.values import Artifact, Metric, ResultPart, StepOutput


def make_data(ctx: StepContext) -> StepOutput:
    """Write ``size`` pseudo-random 64-bit integers (fixed ``seed``) to ``data.bin``."""
    size, seed = int(ctx.inputs["size"]), int(ctx.inputs["seed"])
    rng = random.Random(seed)
    path = ctx.work_dir / "data.bin"
    path.write_bytes(struct.pack(f"<{size}q", *(rng.randrange(-2**62, 2**62) for _ in range(size))))
    return StepOutput(outputs={"path": str(path), "count": size})


def _load(path: str) -> list[int]:
    raw = Path(path).read_bytes()
    return list(struct.unpack(f"<{len(raw) // 8}q", raw))


def sort_bench(ctx: StepContext) -> StepOutput:
    """Time sorting the data set ``repeats`` times with the selected algorithm; after each
    repetition, the best throughput so far goes to the live ``items_per_second`` series
    (what ``cmx sweep --search --prune`` watches)."""
    data = _load(ctx.deps["data"]["path"])
    algorithm = ctx.params["algorithm"]
    repeats = int(ctx.inputs["repeats"])
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        ordered = sorted(data) if algorithm == "sorted" else _heap_sort(data)
        timings.append(time.perf_counter() - start)
        ctx.metrics.report("items_per_second", len(data) / max(min(timings), 1e-9))
    reasons = [] if ordered == sorted(data) else [f"{algorithm} produced an unsorted result"]
    best = min(timings)
    report = ctx.work_dir / "timings.txt"
    report.write_text("\n".join(f"{t:.9f}" for t in timings) + "\n")
    part = ResultPart(
        status="invalid" if reasons else "valid",
        benchmark={"suite": "custom", "task": "demo-sort", "variant": algorithm, "primary_metric": "items_per_second"},
        metrics={
            "items_per_second": Metric(len(data) / best, "items/s", True,
                                       tuple(len(data) / max(t, 1e-9) for t in timings) if repeats > 1 else ()),
            "best_time_s": Metric(best, "s", False, tuple(timings) if repeats > 1 else ()),
            "items": Metric(len(data), "items", True),
        },
        invalid_reasons=tuple(reasons),
    )
    return StepOutput(outputs={"best_time_s": best}, result=part, artifacts=(Artifact(report, "timings"),))


def _heap_sort(data: list[int]) -> list[int]:
    heap = list(data)
    heapq.heapify(heap)
    return [heapq.heappop(heap) for _ in range(len(heap))]
