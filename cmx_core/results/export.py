"""Flatten result documents to Open MLPerf dotted names and export them.

``flatten`` gives one flat row per run: first the Open MLPerf dataset columns
(``metrics.result``, ``system.cpu.model`` ...; values in that dataset's units, e.g. GB and
GHz), then every other scalar of the document under its own dotted path (native units).
Lists of scalars become a JSON string; lists of objects (artifacts, ALE cases, provenance
recipes) are left out: use the ``json`` format for those.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.errors import ResultsError, UsageError
from cmx_core.results.suite_fields import mlperf_field
from cmx_core.results.writer import atomic_write_text

if TYPE_CHECKING:
    from cmx_core.providers.types import Exporter
    from cmx_core.results.records import StoredResult

_GIB = float(1 << 30)
_SKIP = {"artifacts", "metrics"}


def flatten(document: Mapping[str, Any]) -> dict[str, Any]:
    """One flat ``{dotted name: scalar}`` row for the document (see the module doc)."""
    row = _open_mlperf(document)
    rest: dict[str, Any] = {}
    for key, value in document.items():
        if key not in _SKIP:
            _walk(key, value, rest)
    for name, metric in document["metrics"].items():
        rest[f"metrics.{name}"] = metric["value"]
        rest[f"metrics.{name}.unit"] = metric["unit"]
    rest["invalid_reasons"] = "; ".join(document["invalid_reasons"])
    for key, value in rest.items():
        row.setdefault(key, value)
    return row


def _walk(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        if not value:
            out[prefix] = None
        for key, item in value.items():
            _walk(f"{prefix}.{key}", item, out)
    elif isinstance(value, list):
        if all(not isinstance(v, (Mapping, list)) for v in value):
            out[prefix] = json.dumps(value, ensure_ascii=False)
    else:
        out[prefix] = value


def _gib(value: Any) -> float | None:
    return round(value / _GIB, 1) if isinstance(value, (int, float)) else None


def _open_mlperf(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The Open MLPerf (``ctuning/OpenMLPerf``) columns this document can fill."""
    bench, metrics, system = doc["benchmark"], doc["metrics"], doc["system"]
    primary = metrics.get(bench.get("primary_metric") or "") or {}
    accel = system.get("accelerator") or {}
    cpu, software = system["cpu"], doc["software"]
    model, cost = doc.get("model") or {}, doc.get("cost") or {}
    total = accel.get("total_count") or 0
    value = primary.get("value")
    per_accel = value / total if value is not None and total and primary.get("higher_is_better") else None
    os_facts = system["os"]
    os_name = " ".join(p for p in (os_facts.get("distro"), os_facts.get("version")) if p) or os_facts.get("name")
    os_name = os_facts.get("pretty_name") or os_name
    tokens = (metrics.get("tokens_per_second") or {}).get("value")
    freq = cpu.get("frequency_mhz")
    return {
        "metrics.result": value,
        "metrics.result_per_accelerator": per_accel,
        "metrics.accuracy": (metrics.get("accuracy") or {}).get("value"),
        "metrics.units": primary.get("unit"),
        "model.name": model.get("name") or bench["task"],
        "model.mlperf_name": model.get("mlperf_name") or mlperf_field(doc, "mlperf_name"),
        "model.architecture": model.get("architecture"),
        "model.number_of_parameters": model.get("number_of_parameters"),
        "model.weight_data_types": model.get("weight_data_types"),
        "system.accelerator.vendor": accel.get("vendor"),
        "system.accelerator.name": accel.get("name"),
        "system.accelerator.count_per_node": accel.get("count_per_node"),
        "system.accelerator.total_count": accel.get("total_count"),
        "system.accelerator.memory_capacity": _gib(accel.get("memory_capacity_bytes")),
        "system.accelerator.memory_config": None,
        "system.interconnect.accelerator": accel.get("interconnect"),
        "system.cpu.vendor": cpu.get("vendor"),
        "system.cpu.model": cpu.get("model"),
        "system.cpu.core_count": cpu.get("core_count"),
        "system.cpu.count_per_node": cpu.get("count_per_node"),
        "system.cpu.frequency": round(freq / 1000.0, 3) if isinstance(freq, (int, float)) else None,
        "system.cpu.caches": None,
        "system.cpu.vcpu_count": cpu.get("vcpu_count"),
        "system.name": system.get("name"),
        "system.type": system.get("type"),
        "system.cooling": None,
        "system.number_of_nodes": system.get("number_of_nodes"),
        "system.memory.capacity": _gib(system["memory"].get("capacity_bytes")),
        "system.memory.configuration": None,
        "system.interconnect.accelerator_host": None,
        "software.framework": software.get("framework"),
        "software.version": software.get("framework_version"),
        "software.operating_system": os_name,
        "submission.organization": None,
        "submission.division": bench.get("division"),
        "submission.scenario": bench.get("scenario"),
        "submission.availability": mlperf_field(doc, "availability"),
        "benchmark.name": mlperf_field(doc, "mlperf_name") or bench["task"],
        "benchmark.version": bench.get("suite_version"),
        "datetime": doc["created_at"],
        "system.price_per_hour": cost.get("price_per_hour_usd"),
        "result.tokens_per_second": tokens,
        "result.cost_per_million_tokens": cost.get("cost_per_million_tokens_usd"),
        "system.total_accelerators": total,
    }


# -- export formats ---------------------------------------------------------------------

BUILTIN_FORMATS = {
    "json": "One JSON file: an array of the result documents",
    "csv": "One CSV file: a row per run, columns are the flattened (Open MLPerf) names",
}


def formats(exporters: Mapping[str, Exporter] | None = None) -> dict[str, str]:
    """``{format name: summary}``: the built-ins, then the plugins' ``exporters`` (the
    registry's, handed in; built-ins win a clash)."""
    found = dict(BUILTIN_FORMATS)
    for name, exporter in (exporters or {}).items():
        found.setdefault(name, exporter.summary)
    return found


def export_results(
    fmt: str,
    dest: Path,
    results: Sequence[StoredResult],
    exporters: Mapping[str, Exporter] | None = None,
) -> Path:
    """Write ``results`` to ``dest`` in format ``fmt``; return what was written. A format
    other than the built-ins comes from ``exporters`` (the registry's, handed in).

    For ``json``/``csv`` an existing directory ``dest`` gets ``results.<fmt>`` inside it.
    """
    if not results:
        raise UsageError("export needs at least one run")
    dest = Path(dest)
    builtin: dict[str, Callable[[Sequence[StoredResult]], str]] = {"json": _to_json, "csv": _to_csv}
    if fmt in builtin:
        check_dest(dest)
        target = dest / f"results.{fmt}" if dest.is_dir() else dest
        atomic_write_text(target, builtin[fmt](results))
        return target
    found = dict(exporters or {})
    if fmt not in found:
        known = ", ".join(sorted(set(BUILTIN_FORMATS) | set(found)))
        raise UsageError(f"unknown export format {fmt!r}; known formats: {known}")
    found[fmt].export([r.document for r in results], [r.run_dir for r in results], dest)
    return dest


def _to_json(results: Sequence[StoredResult]) -> str:
    return json.dumps([r.document for r in results], indent=2, ensure_ascii=False) + "\n"


def _to_csv(results: Sequence[StoredResult]) -> str:
    rows = [flatten(r.document) for r in results]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def check_dest(dest: Path) -> None:
    """Refuse a destination whose parent does not exist (a typo, most often)."""
    if not dest.is_dir() and not dest.parent.is_dir():
        raise ResultsError(f"{dest}: its directory {dest.parent} does not exist; create it first")
