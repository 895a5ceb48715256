"""Realistic example runs, for the docs, cmx's tests and plugin authors' tests.

``H100_FACTS``, ``A100_MIG_FACTS`` and ``MI300X_FACTS`` are shaped like ``cmx detect --json``
with the cmx-detect plugin on its recorded machines; ``MINIMAL_FACTS`` like cmx-core's
built-in detectors alone on a small VM.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results.document import RunRecord, build_document

MINIMAL_FACTS: dict[str, Any] = {
    "os": {"name": "linux", "distro": "Debian GNU/Linux", "version": "12", "kernel": "6.1.0-28-cloud-amd64",
           "arch": "x86_64", "libc": "glibc 2.36"},
    "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "sockets": 1, "cores": 1,
            "threads": 2, "frequency_mhz": 2200.0, "flags": ["avx2", "fma"]},
    "memory": {"total_bytes": 8_335_265_792, "available_bytes": 6_012_444_672},
    "python": {"version": "3.11.2", "implementation": "CPython", "executable": "/usr/bin/python3"},
}


@dataclass(frozen=True)
class _GpuModel:
    """A kind of GPU as the detector reports it: name, accelerator tag, memory, compute capability, vendor."""

    name: str
    tag: str
    memory: int
    cc: str
    vendor: str = "nvidia"


def _gpu(index: int, model: _GpuModel, mig: list[str] | None = None) -> dict[str, Any]:
    name, tag, memory, cc, vendor = model.name, model.tag, model.memory, model.cc, model.vendor
    return {
        "index": index, "vendor": vendor, "name": name, "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000",
        "memory_total_bytes": memory, "compute_capability": cc, "accelerator_tag": tag,
        "accelerator_tags": [tag], "mig_mode": "enabled" if mig else ("disabled" if vendor == "nvidia" else None),
        "mig_devices": [{"index": i, "name": f"{name} MIG {p}", "uuid": None, "memory_total_bytes": None}
                        for i, p in enumerate(mig or [])],
    }


_UBUNTU = {"name": "linux", "distro": "Ubuntu", "distro_id": "ubuntu", "version": "22.04",
           "pretty_name": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0", "arch": "x86_64", "libc": "glibc 2.35"}

H100_FACTS: dict[str, Any] = {
    **MINIMAL_FACTS,
    "os": _UBUNTU,
    "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores": 112,
            "threads": 224, "frequency_mhz": 2000.0, "flags": ["avx512f", "amx_tile"], "arch": "x86_64",
            "caches": {"l2_bytes": 234_881_024, "l3_bytes": 220_200_960}},
    "memory": {"total_bytes": 2_164_110_848_000, "available_bytes": 2_121_369_989_120, "swap_total_bytes": 0},
    "gpus": {
        "devices": [_gpu(i, _GpuModel("NVIDIA H100 80GB HBM3", "h100", 85_520_809_984, "9.0")) for i in range(8)],
        "driver_version": "550.54.15", "cuda_driver_version": "12.4", "source": "nvml", "reason": None,
        "interconnect": "nvlink", "rocm_version": None, "notes": [],
    },
    "cuda": {"toolkits": [{"home": "/usr/local/cuda-12.4", "version": "12.4.1"}], "rejected": [],
             "selected": {"version": "12.4.1", "home": "/usr/local/cuda-12.4", "nvcc": None, "source": "PATH"},
             "reason": "selected /usr/local/cuda-12.4"},
    "accelerator": ["h100", "h100-sxm", "8xh100"],
    "torch": {"installed": True, "version": "2.3.1+cu121", "cuda_build": "12.1", "cuda_available": True,
              "device_count": 8},
}
"""Shaped like ``cmx detect --replay h100-sxm-8x --json`` (cmx-detect's recorded DGX H100)."""

A100_MIG_FACTS: dict[str, Any] = {
    **H100_FACTS,
    "gpus": {
        "devices": [_gpu(0, _GpuModel("NVIDIA A100-SXM4-80GB", "a100", 85_899_345_920, "8.0"),
                         mig=["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])],
        "driver_version": "535.183.01", "cuda_driver_version": "12.2", "source": "nvml", "reason": None,
        "interconnect": "nvlink",
    },
    "accelerator": ["a100"],
}

MI300X_FACTS: dict[str, Any] = {
    **H100_FACTS,
    "gpus": {
        "devices": [_gpu(i, _GpuModel("AMD Instinct MI300X", "mi300x", 206_141_652_992, "gfx942", vendor="amd"))
                    for i in range(8)],
        "driver_version": "6.7.0", "cuda_driver_version": None, "source": "amd-smi", "reason": None,
        "interconnect": None, "rocm_version": "6.2.0",
    },
    "cuda": {"toolkits": [], "selected": None, "reason": "no CUDA toolkit found"},
    "accelerator": ["mi300x", "8xmi300x"],
    "torch": {"installed": False, "reason": "No module named 'torch'"},
}

_T0 = datetime(2026, 11, 30, 7, 0, 0, tzinfo=timezone.utc)


def mlperf_part(samples_per_second: float = 1234.5, p99_ns: int = 41_000_000) -> ResultPart:
    """An MLPerf Inference Offline performance run, as the mlperf plugin would report it."""
    return ResultPart(
        status="valid",
        benchmark={"suite": "mlperf-inference", "suite_version": "5.0", "task": "resnet50",
                   "scenario": "Offline", "mode": "PerformanceOnly", "division": "closed",
                   "variant": "99", "primary_metric": "samples_per_second"},
        metrics={
            "samples_per_second": Metric(samples_per_second, "samples/s", True),
            "latency_p99_ns": Metric(p99_ns, "ns", False),
        },
        sections={
            "mlperf": {"result_validity": "VALID", "min_duration_met": True, "min_queries_met": True,
                       "early_stopping_met": True, "perf_constraints_met": True, "query_count": 1,
                       "loadgen_version": "5.0.4", "effective": {"min_duration_ms": 600_000},
                       "mlperf_name": "resnet", "availability": "available"},
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
    return build_document(example_record(run_dir, **changes))
