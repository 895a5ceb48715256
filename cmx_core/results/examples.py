"""Realistic example runs, for the docs, cmx's tests and plugin authors' tests.

``H100_FACTS`` is shaped like ``cmx detect --json`` on a DGX-class node with the cmx-detect
plugin; ``MINIMAL_FACTS`` like cmx-core's built-in detectors alone on a small VM.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cmx_core.providers import Metric, ResultPart
from cmx_core.results.document import RunRecord

MINIMAL_FACTS: dict[str, Any] = {
    "os": {"name": "linux", "distro": "Debian GNU/Linux", "version": "12", "kernel": "6.1.0-28-cloud-amd64",
           "arch": "x86_64", "libc": "glibc 2.36"},
    "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "sockets": 1, "cores": 1,
            "threads": 2, "frequency_mhz": 2200.0, "flags": ["avx2", "fma"]},
    "memory": {"total_bytes": 8_335_265_792, "available_bytes": 6_012_444_672},
    "python": {"version": "3.11.2", "implementation": "CPython", "executable": "/usr/bin/python3"},
}

H100_FACTS: dict[str, Any] = {
    **MINIMAL_FACTS,
    "cpu": {"vendor": "AuthenticAMD", "model": "AMD EPYC 9454 48-Core Processor", "sockets": 2, "cores": 96,
            "threads": 192, "frequency_mhz": 2750.0, "flags": ["avx512f"]},
    "memory": {"total_bytes": 2_164_173_045_760, "available_bytes": 2_000_000_000_000},
    "gpus": {
        "devices": [
            {"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
             "memory_total_bytes": 85_520_809_984, "compute_capability": "9.0", "accelerator_tag": "h100"}
            for i in range(8)
        ],
        "driver_version": "550.54.15", "cuda_driver_version": "12.4", "source": "nvml", "reason": None,
    },
    "cuda": {"toolkits": [{"version": "12.4.1", "home": "/usr/local/cuda-12.4"}],
             "selected": {"version": "12.4.1", "home": "/usr/local/cuda-12.4"}, "reason": None},
    "accelerator": ["h100"],
    "torch": {"version": "2.5.1+cu124", "cuda": "12.4"},
}

_T0 = datetime(2026, 11, 30, 7, 0, 0, tzinfo=timezone.utc)


def mlperf_part(samples_per_second: float = 1234.5, p99_ns: int = 41_000_000) -> ResultPart:
    """An MLPerf Inference Offline performance run, as the mlperf plugin would report it."""
    return ResultPart(
        status="valid",
        benchmark={"suite": "mlperf-inference", "suite_version": "5.0", "task": "resnet50",
                   "scenario": "Offline", "mode": "PerformanceOnly", "division": "closed",
                   "mlperf_name": "resnet", "variant": "99", "primary_metric": "samples_per_second"},
        metrics={
            "samples_per_second": Metric(samples_per_second, "samples/s", True),
            "latency_p99_ns": Metric(p99_ns, "ns", False),
        },
        sections={
            "mlperf": {"result_validity": "VALID", "min_duration_met": True, "min_queries_met": True,
                       "early_stopping_met": True, "perf_constraints_met": True, "query_count": 1,
                       "loadgen_version": "5.0.4", "effective": {"min_duration_ms": 600_000}},
            "model": {"name": "resnet50-v1.5", "mlperf_name": "resnet", "number_of_parameters": 25_600_000,
                      "weight_data_types": "fp16"},
            "software": {"framework": "pytorch", "framework_version": "2.5.1"},
        },
    )


def example_record(run_dir: Path, run_id: str = "3f2a9c1e-0b7d-4e55-9a61-0c1d2e3f4a5b", **changes: Any) -> RunRecord:
    """A plain (no result part) run of the core ``detect-os`` recipe; ``changes`` override fields."""
    record = RunRecord(
        run_id=run_id,
        tags=("detect", "os"),
        inputs={},
        variations={},
        recipe_name="detect-os",
        recipe_tags=("detect", "os"),
        recipe_version="1.0",
        recipes=(("detect-os", "1.0", "sha256:" + "ab" * 32, "recipes/detect-os.yaml"),),
        plugins=(("cmx-core", "cmx-core", "0.1.0"),),
        facts=MINIMAL_FACTS,
        outputs={"os": "linux"},
        part=None,
        artifacts=(),
        run_dir=run_dir,
        started_at=_T0,
        finished_at=_T0 + timedelta(seconds=1.5),
        lock_digest="sha256:" + "cd" * 32,
        error=None,
    )
    return replace(record, **changes)


def example_document(run_dir: Path, **changes: Any) -> dict[str, Any]:
    """``build_document(example_record(run_dir, **changes))``."""
    from cmx_core.results.document import build_document

    return build_document(example_record(run_dir, **changes))
