"""A run on this machine with another machine's ``--facts`` is refused.

A facts file stands in for detection: it is how ``cmx plan`` plans for a machine it is not
on, and how a remote executor (Slurm, Ray, Kubernetes) is planned for the nodes it submits
to. An executor that runs the plan here (``local``, ``docker``) would record those facts as
the machine it measured on, so a file that says GPUs or a CPU this machine does not have is
bad input (exit 2), refused before anything runs. A file of this machine's own facts is
accepted; so is one that says nothing about GPUs or the CPU model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.facts.store import FactStore


@dataclass(frozen=True)
class FactsFileRef:
    """The facts file a run used: its path and the sha256 of its bytes (``provenance.facts_file``)."""

    path: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}


def facts_file_ref(path: Path) -> FactsFileRef:
    """The reference recorded in a result's provenance for the facts file at ``path``."""
    return FactsFileRef(str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest())


def gpu_names(gpus: Any) -> list[str]:
    """The sorted device names of a ``gpus`` fact (none for a missing or empty fact)."""
    devices = gpus.get("devices") if isinstance(gpus, Mapping) else None
    return sorted(str(d.get("name") or d.get("accelerator_tag") or "?") for d in devices or ()
                  if isinstance(d, Mapping))


def cpu_model(cpu: Any) -> str | None:
    model = cpu.get("model") if isinstance(cpu, Mapping) else None
    return str(model) if model else None


def contradictions(file_facts: Mapping[str, Any], here: FactStore) -> list[str]:
    """What the facts file says about GPUs and the CPU model that detection here does not find."""
    found: list[str] = []
    if "gpus" in file_facts:
        theirs = gpu_names(file_facts.get("gpus"))
        ours = gpu_names(_here(here, "gpus"))
        if theirs != ours:
            found.append(f"GPUs {_gpus_text(theirs)}, here {_gpus_text(ours)}")
    elif file_facts.get("accelerator"):
        theirs_tags, ours_tags = _tags(file_facts["accelerator"]), _tags(_here(here, "accelerator"))
        if theirs_tags != ours_tags:
            found.append(f"accelerator {','.join(theirs_tags)}, here {','.join(ours_tags) or 'none'}")
    theirs_cpu = cpu_model(file_facts.get("cpu"))
    if theirs_cpu is not None and "cpu" in here.available():
        ours_cpu = cpu_model(here.try_get("cpu"))
        if ours_cpu is not None and ours_cpu != theirs_cpu:
            found.append(f"CPU '{theirs_cpu}', here '{ours_cpu}'")
    return found


def _here(store: FactStore, name: str) -> Any:
    """A fact as detected here; None when no loaded detector provides it."""
    return store.try_get(name) if name in store.available() else None


def _tags(value: Any) -> list[str]:
    return sorted(str(v) for v in value) if isinstance(value, list) else []


def _gpus_text(names: list[str]) -> str:
    if not names:
        return "none"
    counts = {name: names.count(name) for name in names}
    return ", ".join(f"{count}x {name}" for name, count in counts.items())


def check_facts_here(facts: FactStore, detectors_here: FactStore, executor: str, runs_here: bool) -> None:
    """Refuse (exit 2) a run by an executor that runs on this machine when its facts file
    contradicts what detection here finds."""
    if facts.file_facts is None or not runs_here:
        return
    found = contradictions(facts.file_facts, detectors_here)
    if found:
        raise UsageError(
            f"--facts {facts.source} describes another machine ({'; '.join(found)}), and executor "
            f"'{executor}' runs on this one: --facts is for planning (cmx plan) and for remote executors "
            "whose machines those facts describe (--executor slurm, ray or k8s); drop --facts to run here")
