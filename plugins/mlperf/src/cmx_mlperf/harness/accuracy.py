"""Read ``mlperf_log_accuracy.json`` and write the ``accuracy.txt`` a submission carries."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from cmx_core.errors import StepFailed
from cmx_mlperf.sut import AccuracyEntry

ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"


def read_entries(path: Path) -> list[AccuracyEntry]:
    """The entries of an accuracy log, ordered by QSL index (duplicates kept)."""
    try:
        raw = json.loads(path.read_text() or "[]")
    except (OSError, json.JSONDecodeError) as exc:
        raise StepFailed(f"{path}: cannot read the LoadGen accuracy log ({exc})") from None
    try:
        entries = [AccuracyEntry(int(e["qsl_idx"]), bytes.fromhex(e["data"])) for e in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise StepFailed(f"{path}: malformed accuracy log entry ({exc})") from None
    return sorted(entries, key=lambda e: e.qsl_idx)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_accuracy_txt(out_dir: Path, metrics: Mapping[str, float], n_entries: int) -> Path:
    """``accuracy.txt``: one ``name=value`` line per metric, the entry count and the
    ``hash=`` of the full accuracy log (what the submission checker looks for)."""
    lines = [f"{name}={value:.6g}" if isinstance(value, float) else f"{name}={value}"
             for name, value in metrics.items()]
    if "samples" not in metrics:
        lines.append(f"samples={n_entries}")
    lines.append(f"hash={file_sha256(out_dir / ACCURACY_LOG)}")
    path = out_dir / ACCURACY_TXT
    path.write_text("\n".join(lines) + "\n")
    return path
