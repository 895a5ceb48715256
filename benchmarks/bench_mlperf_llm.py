"""Tokens/s, TTFT and TPOT of the tiny local Llama on this machine's CPU (or a GPU).

Builds the tiny Llama into a temporary cmx home, then runs LoadGen Offline and Server
through cmx's harness (``mlperf.loadgen`` step, hf-llm SUT, one child process per test)
and prints LoadGen's numbers; for reference it also times the SUT's generation loop
directly (no LoadGen). Numbers are printed, never asserted.

    python benchmarks/bench_mlperf_llm.py [--duration 10] [--max-new-tokens 32]

GPU check (a device machine): ``--device cuda --dtype bfloat16 --duration 60`` with a larger
built model (``--hidden-size 1024 --layers 8``) or ``--model-dir DIR``; ``--vllm`` also runs
the openai-http SUT against ``vllm serve`` started on loopback (when vllm is installed).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any


def _direct(model_dir: Path, args: argparse.Namespace, batch_size: int) -> tuple[float, float]:
    """(tokens/s, ms per token) of the greedy loop on the 36 built-in prompts."""
    from cmx_mlperf.llm.dataset import SAMPLES
    from cmx_mlperf.llm.generate import GenerationSettings, LlamaGenerator

    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, device=args.device, dtype=args.dtype,
                                  threads=1 if args.device == "cpu" else None)
    gen = LlamaGenerator(model_dir, settings)
    prompts = [gen.encode(s.prompt) for s in SAMPLES]
    gen.generate(prompts[:batch_size], lambda r, t: None)  # warm-up
    tokens, began = 0, time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        tokens += sum(len(o) for o in gen.generate(prompts[i:i + batch_size], lambda r, t: None))
    elapsed = time.perf_counter() - began
    return tokens / elapsed, 1000 * elapsed / tokens * batch_size


def _sut(kind: str, model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    if kind == "hf-llm":
        return {"model_dir": str(model_dir), "max_new_tokens": args.max_new_tokens, "batch_size": args.batch_size,
                "device": args.device, "dtype": args.dtype, "threads": 1 if args.device == "cpu" else 0}
    port = 18000
    return {"base_url": f"http://127.0.0.1:{port}", "model": str(model_dir), "max_tokens": args.max_new_tokens,
            "concurrency": 256, "launch": ["vllm", "serve", str(model_dir), "--host", "127.0.0.1",
                                           "--port", str(port), "--dtype", "auto"]}


def _loadgen(model_dir: Path, kind: str, scenario: str, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    from cmx_core.testing import make_step_context
    from cmx_mlperf.harness.step import run_step

    params: dict[str, Any] = {
        "sut": kind, "scenario": scenario, "model_name": "llama3.1-8b", "duration_s": args.duration,
        "min_query_count": 460 if scenario == "Server" else 1, "timeout_s": 1800,
        "sut_params": _sut(kind, model_dir, args),
    }
    if args.target_qps and scenario == "Server":
        params["target_qps"] = args.target_qps
    began = time.perf_counter()
    part = run_step(make_step_context(base / f"{kind}-{scenario}", params=params)).result
    if part is None:
        raise SystemExit(f"{kind}/{scenario}: the mlperf.loadgen step returned no result")
    m = part.metrics

    def value(name: str) -> float | None:
        return m[name].value if name in m else None

    return {
        "scenario": f"{kind}/{scenario}", "status": part.status, "wall_s": time.perf_counter() - began,
        "tokens_per_s": value("tokens_per_second"),
        "samples_per_s": value("samples_per_second") or value("completed_samples_per_second"),
        "ttft_p50_ms": _ms(value("ttft_p50_ns")), "ttft_p99_ms": _ms(value("ttft_p99_ns")),
        "tpot_p50_ms": _ms(value("tpot_p50_ns")), "tpot_p99_ms": _ms(value("tpot_p99_ns")),
        "derived": part.sections["mlperf"].get("derived_settings"),
        "reasons": list(part.invalid_reasons),
    }


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="LoadGen min_duration (s)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--target-qps", type=float, default=0.0, help="Server QPS; 0: the harness calibrates")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--intermediate-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--model-dir", default="", help="an existing Llama directory instead of building one")
    parser.add_argument("--vllm", action="store_true", help="also run openai-http against vllm serve")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cmx-bench-llm-") as tmp:
        base = Path(tmp)
        os.environ["CMX_HOME"] = str(base / "home")
        from cmx_mlperf.llm.tiny_llama import TinyLlamaSpec, build

        began = time.perf_counter()
        spec = TinyLlamaSpec(hidden_size=args.hidden_size, intermediate_size=args.intermediate_size,
                             num_hidden_layers=args.layers)
        model_dir = Path(args.model_dir) if args.model_dir else build(base / "model", spec)
        name = args.model_dir or spec.name
        print(f"model {name} ready in {time.perf_counter() - began:.1f} s "
              f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, device {args.device})")
        for bs in (1, args.batch_size):
            tps, ms = _direct(model_dir, args, bs)
            print(f"direct loop, batch {bs:>2}: {tps:8.0f} tokens/s  {ms:6.2f} ms per decoding step")
        print(f"{'sut/scenario':<19} {'status':<8} {'tokens/s':>9} {'samples/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} "
              f"{'TPOT p50':>9} {'TPOT p99':>9} {'wall s':>7}  (ms)")
        runs = [("hf-llm", "Offline"), ("hf-llm", "Server")]
        runs += [("openai-http", "Offline"), ("openai-http", "Server")] if args.vllm else []
        for kind, scenario in runs:
            r = _loadgen(model_dir, kind, scenario, args, base)
            print(f"{r['scenario']:<19} {r['status']:<8} {_fmt(r['tokens_per_s'], '9.0f')} "
                  f"{_fmt(r['samples_per_s'], '9.1f')} "
                  f"{_fmt(r['ttft_p50_ms'], '9.1f')} {_fmt(r['ttft_p99_ms'], '9.1f')} {_fmt(r['tpot_p50_ms'], '9.2f')} "
                  f"{_fmt(r['tpot_p99_ms'], '9.2f')} {r['wall_s']:7.1f}  derived={r['derived']}")
            for reason in r["reasons"]:
                print(f"    {reason}")


if __name__ == "__main__":
    main()
