"""The detector table: name -> detect function, cheap fingerprint and cache lifetime.

Each ``detect`` takes a :class:`~cmx_detect.source.Source`; registration binds it to the live
machine, ``cmx detect --replay`` binds it to a fixture. Fingerprints live in
:mod:`cmx_detect.fingerprints`; detect functions import their modules lazily, so a warm run
that only checks fingerprints imports none of the parsers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.api import cache_dir
from cmx_core.errors import CmxError, UsageError
from cmx_detect.convert import to_data
from cmx_detect.fingerprints import (
    fp_containers,
    fp_cpu,
    fp_cuda,
    fp_gpus,
    fp_memory,
    fp_os,
    fp_python,
    fp_torch,
)
from cmx_detect.models import detect, hub_cache, tree_stamp
from cmx_detect.source import LiveSource, Source

DAY_S = 86400.0


@dataclass(frozen=True)
class Spec:
    name: str
    summary: str
    detect: Callable[[Source], Any]
    fingerprint: Callable[[Source], str]
    ttl_s: float | None
    replayed: bool = True  # False: read from this machine only; --replay and --record leave it out


# -- detect functions (imported lazily: importing the plugin must stay cheap) ----------------

def _os(src: Source) -> Any:
    from cmx_detect.system import detect_os  # deferred: start-up: a warm run only checks fingerprints

    return detect_os(src)


def _cpu(src: Source) -> Any:
    from cmx_detect.system import detect_cpu  # deferred: as in _os

    return detect_cpu(src)


def _memory(src: Source) -> Any:
    from cmx_detect.system import detect_memory  # deferred: as in _os

    return detect_memory(src)


def _python(src: Source) -> Any:
    from cmx_detect.system import detect_python  # deferred: as in _os

    return detect_python(src)


def _cuda(src: Source) -> Any:
    from cmx_detect.cuda import detect_cuda  # deferred: as in _os

    return detect_cuda(src)


def _gpus(src: Source) -> Any:
    from cmx_detect.gpus import visible_gpus  # deferred: start-up: 18 modules not needed to start cmx
    return visible_gpus(src, gpus_for(src))


def _node_gpus(src: Source) -> Any:
    return gpus_for(src)


def _accelerator(src: Source) -> Any:
    # deferred: start-up: 18 modules not needed to start cmx
    from cmx_detect.gpus import detect_accelerator, visible_gpus
    return detect_accelerator(src, visible_gpus(src, gpus_for(src)))


def _torch(src: Source) -> Any:
    from cmx_detect.torchinfo import detect_torch  # deferred: as in _os

    return detect_torch(src)


def _containers(src: Source) -> Any:
    from cmx_detect.containers import detect_container_engines  # deferred: as in _os (the facts' dataclasses)

    return detect_container_engines(src)


_GPU_MEMO: dict[int, tuple[Source, float, Any]] = {}
GPU_MEMO_S = 10.0


_MODEL_ENV = ("HF_HUB_CACHE", "HF_HOME", "CMX_MODEL_PATHS", "CMX_MLC_MODELS")


def _model_env(src: Source) -> dict[str, str]:
    return {name: value for name in _MODEL_ENV if (value := src.env(name))}


def _models(src: Source) -> Any:
    return detect(_model_env(src), cache_dir() / "model-digests.json")


def fp_models(src: Source) -> str:
    """The model roots and their mtimes, and the stats of every model file (inode, size, mtime,
    ctime: :func:`~cmx_detect.models.tree_stamp`): a new snapshot or directory, or a file
    edited in place, refreshes the fact."""
    env = _model_env(src)
    roots = [hub_cache(env), *(p for p in env.get("CMX_MODEL_PATHS", "").split(os.pathsep) if p)]
    stamps = []
    for root in map(str, roots):
        try:
            stamps.append(f"{root}:{os.stat(root).st_mtime_ns}")
        except OSError:
            stamps.append(f"{root}:-")
    return ";".join(sorted(env.items()).__repr__().split()) + "|" + ";".join(stamps) + "|" + tree_stamp(env)


def gpus_for(src: Source) -> Any:
    """GPU facts of ``src``; ``gpus`` and ``accelerator`` detected back to back share one
    probe (reused for :data:`GPU_MEMO_S` seconds, so a later re-detection probes again)."""
    from cmx_detect.gpus import detect_gpus  # deferred: start-up: 18 modules not needed to start cmx

    now = time.monotonic()
    hit = _GPU_MEMO.get(id(src))
    if hit is None or hit[0] is not src or now - hit[1] > GPU_MEMO_S:
        hit = (src, now, detect_gpus(src))
        _GPU_MEMO[id(src)] = hit
    return hit[2]


SPECS: tuple[Spec, ...] = (
    Spec("os", "OS name, distro, version, kernel, arch, libc", _os, fp_os, DAY_S),
    Spec("cpu", "CPU vendor, model, sockets/cores/threads, frequency, caches, ISA flags", _cpu, fp_cpu, DAY_S),
    Spec("memory", "Total and available memory (bytes)", _memory, fp_memory, 300.0),
    Spec("python", "The running Python interpreter", _python, fp_python, DAY_S),
    Spec("cuda", "CUDA toolkits (nvcc through wrappers, cuda.h checked) and the selected one", _cuda, fp_cuda, DAY_S),
    Spec("gpus", "NVIDIA (NVML, nvidia-smi) and AMD (amd-smi, rocm-smi) GPUs a job may use (CUDA_VISIBLE_DEVICES...)",
         _gpus, fp_gpus, DAY_S),
    Spec("node_gpus", "Every GPU of the node, whatever the visibility variables say", _node_gpus, fp_gpus, DAY_S),
    Spec("accelerator", "Canonical accelerator tags present (h100, a100-80gb, 8xh100...)", _accelerator,
         fp_gpus, DAY_S),
    Spec("torch", "torch version, CUDA/ROCm build, visible devices", _torch, fp_torch, DAY_S),
    Spec("models", "Model directories on this machine (Hugging Face hub cache, CMX_MODEL_PATHS, MLCommons "
                   "paths): architecture, parameters, dtype, shards, tokenizer, content digest, tags",
         _models, fp_models, 60.0, replayed=False),
    Spec("container_engines", "Docker/Podman: sockets, versions, GPU runtimes", _containers, fp_containers, 300.0),
)
NAMES: tuple[str, ...] = tuple(s.name for s in SPECS)


def select(only: Sequence[str] | None) -> list[Spec]:
    """The specs named in ``only`` (all when empty); an unknown name is a usage error."""
    if not only:
        return list(SPECS)
    unknown = [n for n in only if n not in NAMES]
    if unknown:
        raise UsageError(f"--only {','.join(only)}: unknown detector '{unknown[0]}'; known: {', '.join(NAMES)}")
    return [s for s in SPECS if s.name in only]


def run_all(src: Source, only: Sequence[str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Facts and per-detector errors. Bad user input (a malformed override or fixture) is a
    :class:`CmxError` and propagates; anything else a detector raises is reported, not fatal."""
    facts: dict[str, Any] = {}
    errors: dict[str, str] = {}

    for spec in select(only):
        if not spec.replayed and type(src) is not LiveSource:
            continue
        try:
            facts[spec.name] = to_data(spec.detect(src))
        except CmxError:
            raise
        except Exception as err:  # noqa: BLE001 - one broken detector must not hide the others
            errors[spec.name] = f"{type(err).__name__}: {err}"
    return facts, errors
