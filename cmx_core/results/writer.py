"""Write ``result.json`` atomically: validate, write a temp file beside it, then rename."""

from __future__ import annotations

import json
import os

from cmx_core.datautil import atomic_write
from cmx_core.errors import ResultsError
from cmx_core.results import RESULT_FILE
from cmx_core.results.validate import validate_document

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from cmx_core.providers.types import Suite

__all__ = ["RESULT_FILE", "atomic_write_text", "dumps", "write_result"]


def write_result(
    run_dir: Path, document: Mapping[str, Any], *, suites: Mapping[str, Suite] | None
) -> Path:
    """Validate ``document`` once against the envelope and ``suites`` (name -> Suite, e.g.
    ``registry.suites``; None checks the envelope only), then write it to
    ``run_dir/result.json``; return that path.

    Readers see either the previous file or the complete new one, never a partial write;
    on any failure nothing is left behind (the temp file is removed).
    """
    from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

    target = Path(run_dir) / RESULT_FILE
    validate_document(document, source=str(target), suites=suites)
    text = dumps(document, source=str(target))
    atomic_write_text(target, text)
    return target


def dumps(document: Mapping[str, Any], source: str) -> str:
    """Serialise as strict JSON (no NaN) or raise :class:`ResultsError`."""
    try:
        return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ResultsError(f"{source}: result document is not JSON data: {exc}") from None


def atomic_write_text(target: str | Path, text: str) -> None:
    """Write ``text`` to ``target`` atomically (see :func:`cmx_core.datautil.atomic_write`)."""
    parent = os.path.dirname(os.fspath(target))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"{parent}: cannot create directory ({exc.strerror})") from None
    try:
        atomic_write(target, text)
    except OSError as exc:
        raise ResultsError(f"{target}: cannot write ({exc.strerror or exc})") from None
