#!/usr/bin/env python3
"""Benchmark cmx-detect's model digest: a cold and a warm content digest of a 1 GB model tree.

    python benchmarks/bench_model_digest.py [--gb 1] [--shards 4] [--runs 5] [--json]

The tree (config.json and ``--shards`` safetensors files of ``--gb`` GB together, real bytes
written once) lives in a temporary directory. Cold: a fresh digest cache, so every file is
hashed. Warm: the cache from the cold run, so each file is only stat'ed (inode, size, mtime)
and the manifest re-hashed. The target is a warm check under 50 ms for 1 GB (docs/models.md);
timings are printed, never asserted in tests (a busy CI machine would make them flaky).
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

WARM_TARGET_S = 0.050


def make_tree(root: Path, total_bytes: int, shards: int) -> None:
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    per = total_bytes // shards
    block = bytes(range(256)) * 4096  # 1 MiB, written repeatedly: real blocks, not a sparse hole
    for index in range(shards):
        count = per // 2
        header = json.dumps({"w": {"dtype": "BF16", "shape": [count], "data_offsets": [0, count * 2]}}).encode()
        with (root / f"model-{index + 1:05d}-of-{shards:05d}.safetensors").open("wb") as handle:
            handle.write(struct.pack("<Q", len(header)) + header)
            left = count * 2
            while left > 0:
                handle.write(block[:left])
                left -= len(block)


def main() -> int:
    from cmx_detect.models import DigestCache, describe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, cache_file = Path(tmp) / "model", Path(tmp) / "digests.json"
        root.mkdir()
        make_tree(root, int(args.gb * 1e9), args.shards)
        start = time.perf_counter()
        cold = DigestCache(cache_file)
        digest = describe(root, cache=cold).digest
        cold.save()
        cold_s = time.perf_counter() - start
        warm = []
        for _ in range(args.runs):
            start = time.perf_counter()
            cache = DigestCache(cache_file)
            assert describe(root, cache=cache).digest == digest and cache.hashed == 0
            warm.append(time.perf_counter() - start)
    report = {"gb": args.gb, "shards": args.shards, "cold_s": round(cold_s, 3),
              "warm_median_s": round(statistics.median(warm), 4), "warm_min_s": round(min(warm), 4),
              "warm_target_s": WARM_TARGET_S, "met": statistics.median(warm) < WARM_TARGET_S}
    print(json.dumps(report) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
