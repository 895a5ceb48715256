"""What two result documents of the same plan must share, whatever ran them.

Two runs of one plan (a local run and the same plan through Slurm, Ray, a container or a
Kubernetes Job) differ in what no executor can keep equal: their ids and times, the paths
on the side that ran them, the measured values and the name of the host. :func:`comparable`
drops exactly that (and the ``telemetry`` and ``conditions`` sections: measured, and absent
where a far side found every node cached) and keeps the rest (status, benchmark, the metrics' names, units and
directions, the inputs and recipes in provenance, the system but its host name, the kinds and
names of the artifacts), so ``comparable(a) == comparable(b)`` is the test "the same run,
elsewhere". The executor tests of cmx and its plugins use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

VOLATILE_KEYS = ("run_id", "created_at", "timing")
"""Top-level keys that differ between any two runs."""

HOST_FIELDS = ("name",)
"""The ``system`` keys that name the machine a run ran on (its hostname)."""

MEASURED_SECTIONS = ("mlperf", "cost")
"""Sections whose values are measured: their keys must agree, not their values."""

RETRY_KEYS = ("attempts",)
"""Keys of a measured section that appear only when the measurement was repeated (a LoadGen
run recalibrated and retried on a loaded machine): whether a retry was needed is itself
measured, so two runs of one plan may differ in them."""


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` without ids, times, host-side paths, measured values and host fields."""
    kept = {k: v for k, v in document.items() if k not in VOLATILE_KEYS}
    metrics = document.get("metrics") or {}
    kept["metrics"] = {k: (v.get("unit"), v.get("higher_is_better")) for k, v in metrics.items()}
    kept["artifacts"] = sorted((str(a.get("kind")), Path(str(a.get("path"))).name)
                               for a in document.get("artifacts") or () if a.get("kind") != "log")
    kept["provenance"] = {k: v for k, v in (document.get("provenance") or {}).items() if k != "lock_digest"}
    for key in MEASURED_SECTIONS:
        if key in document:
            kept[key] = sorted(k for k in document[key] or () if k not in RETRY_KEYS)
    kept.pop("telemetry", None)  # measured, and absent where every node was a cache hit
    kept.pop("conditions", None)  # measured too (docs/busy-machine.md), and absent as telemetry is
    kept["outputs"] = sorted(document.get("outputs") or ())
    if isinstance(document.get("system"), Mapping):
        kept["system"] = {k: v for k, v in document["system"].items() if k not in HOST_FIELDS}
    return kept


def comparable_across_sweeps(document: Mapping[str, Any], *, ignore_plugins: frozenset[str] = frozenset()
                             ) -> dict[str, Any]:
    """:func:`comparable` for a sweep point held against the same point of another sweep:
    also without the sweep's id, the engine's git commit (a process reads it once, so a commit
    to the checkout between two sweeps changes it) and the plugins named in ``ignore_plugins``
    (one a test loads in its own process only)."""
    kept = comparable(document)
    provenance = dict(kept.get("provenance") or {})
    if isinstance(provenance.get("sweep"), Mapping):
        provenance["sweep"] = {**provenance["sweep"], "id": None}
    if ignore_plugins and isinstance(provenance.get("plugins"), list):
        provenance["plugins"] = [p for p in provenance["plugins"] if p.get("name") not in ignore_plugins]
    kept["provenance"] = provenance
    software = kept.get("software")
    if isinstance(software, Mapping) and isinstance(software.get("engine"), Mapping):
        engine = {k: v for k, v in software["engine"].items() if k != "git_commit"}
        kept["software"] = {**software, "engine": engine}
    return kept


__all__ = ["HOST_FIELDS", "MEASURED_SECTIONS", "RETRY_KEYS", "VOLATILE_KEYS", "comparable", "comparable_across_sweeps"]
