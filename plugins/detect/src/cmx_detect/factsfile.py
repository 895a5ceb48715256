"""Reading a saved facts file (``cmx detect --json`` output) back into typed facts.

cmx-core reads a facts file's ``facts`` key for ``--facts FILE``; this module is the strict,
typed reading for tools and tests: every known fact is checked against its dataclass and
every accelerator tag against the tag table, with one-line errors naming the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx_detect.convert import FactsError, from_data
from cmx_detect.facts import (
    ContainerEngines,
    CpuFacts,
    CudaFacts,
    GpuFacts,
    MemoryFacts,
    OsFacts,
    PythonFacts,
    TorchFacts,
)
from cmx_detect.tags import check_tag

TYPES: dict[str, type] = {
    "os": OsFacts, "cpu": CpuFacts, "memory": MemoryFacts, "python": PythonFacts, "cuda": CudaFacts,
    "gpus": GpuFacts, "torch": TorchFacts, "container_engines": ContainerEngines,
}


def load_facts_file(path: Path) -> dict[str, Any]:
    """Typed facts of a facts file; unknown fact names are kept as plain data."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise FactsError(f"{path}: cannot read facts file: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise FactsError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
    facts = doc.get("facts") if isinstance(doc, dict) else None
    if not isinstance(facts, dict):
        raise FactsError(f"{path}: expected an object with a 'facts' object (the output of 'cmx detect --json')")
    return {name: _typed(path, name, value) for name, value in facts.items()}


def _typed(path: Path, name: str, value: Any) -> Any:
    where = f"{path}: facts.{name}"
    if value is None:
        return None
    if name == "accelerator":
        return check_accelerator(value, where)
    cls = TYPES.get(name)
    return from_data(cls, value, where) if cls else value


def check_accelerator(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise FactsError(f"{where}: expected a list of tags such as [\"h100\"], got {json.dumps(value)[:40]}")
    return [check_tag(t, f"{where}[{i}]") for i, t in enumerate(value)]
