"""Results: the normalized result document of a run, its schema, validation and the store.

Importing this package costs nothing: the names below load their module on first use.

* :class:`RunRecord`, :func:`build_document` (``document``): what the engine knows -> document
* :func:`validate_document` (``validate``): the envelope schema and, given the loaded
  suites, each suite's section (``suites``), with JSON-path errors; validators are compiled
  on first use and cached (``compiled``)
* :func:`write_result` (``writer``): validate once with the suites, then write
  ``result.json`` atomically
* :class:`ResultStore` (``store``): the SQLite index behind ``cmx results``
* :func:`compare_documents` (``compare``), :func:`flatten` / :func:`export_results` (``export``)
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = "1.0"
RESULT_FILE = "result.json"

_LAZY = {
    "RunRecord": "document",
    "build_document": "document",
    "validate_document": "validate",
    "write_result": "writer",
    "ResultStore": "store",
    "StoredResult": "records",
    "RunSummary": "records",
    "compare_documents": "compare",
    "Comparison": "compare",
    "flatten": "export",
    "export_results": "export",
}

__all__ = ["RESULT_FILE", "SCHEMA_PATH", "SCHEMA_VERSION", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "SCHEMA_PATH":  # the published schema file (a Path: imports pathlib)
        from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

        return Path(__file__).resolve().parent.parent / "schemas" / "result.schema.json"
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    return getattr(import_module(f"{__name__}.{module}"), name)
