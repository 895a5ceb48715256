"""MLE-bench's container settings (``environment/config/container_configs/default.json``):
no memory limit, 4 GiB of shared memory, 4 CPUs (``nano_cpus`` 4e9), every GPU requested
(``"gpus": -1``). The ``docker`` variation of the recipes asks the ``docker`` sandbox for them.

cmx-core's :class:`~cmx_core.api.SandboxSpec` carries the CPU count (``Limits.cpus``); shared
memory and GPUs travel in the spec fields named in ``SPEC_FIELDS`` where this cmx-core's spec
has them, and a setting the spec cannot carry is listed as not applied in the result rather
than silently dropped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cmx_core.errors import UsageError

SPEC_FIELDS = {"shm_bytes": "shm_size", "gpus": "gpus"}
"""SandboxSpec field -> the MLE-bench setting it carries."""

MLE_BENCH_DEFAULT = {"mem_limit": None, "shm_size": "4G", "nano_cpus": 4e9, "gpus": -1}
"""MLE-bench's default container config, the values the docker variation uses."""

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size_bytes(text: str, key: str) -> int:
    """Docker's size syntax (``4G``, ``512m``, ``1048576``) in bytes."""
    value = text.strip().lower()
    unit = value[-1] if value and value[-1] in _UNITS and not value[-1].isdigit() else ""
    number = value[: len(value) - len(unit)]
    if not number.isdigit() or int(number) <= 0:
        raise UsageError(f"--{key.replace('_', '-')}={text}: a size like 4G, 512m or 1048576")
    return int(number) * _UNITS[unit]


@dataclass(frozen=True)
class ContainerSettings:
    shm_size: str = "4G"
    gpus: int = -1  # -1: all GPUs, 0: none, N: that many

    def spec_fields(self, spec_type: type) -> tuple[dict[str, Any], list[str]]:
        """The SandboxSpec keyword arguments these settings become, and the settings the spec cannot carry."""
        names = {f.name for f in dataclasses.fields(spec_type)}
        values = {"shm_bytes": size_bytes(self.shm_size, "shm_size"), "gpus": self.gpus}
        applied = {k: v for k, v in values.items() if k in names}
        return applied, [SPEC_FIELDS[k] for k in values if k not in names]
