"""Reading the result frame (:mod:`cmx_k8s.podside`) back out of a pod log."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.api import CmxError
from cmx_k8s.podside import BEGIN, END


@dataclass(frozen=True)
class Frame:
    exit_code: int
    files: dict[str, bytes] = field(default_factory=dict)
    error: str = ""


def wrapper_source() -> str:
    """The pod-side script, passed to the image's Python with ``-c``."""
    return (Path(__file__).parent / "podside.py").read_text(encoding="utf-8")


def read_frame(log: str, max_bytes: int) -> Frame | None:
    """The last frame in ``log``; None when there is none (the pod died before printing it)."""
    end = log.rfind(END)
    begin = log.rfind(BEGIN, 0, end) if end >= 0 else -1
    if begin < 0:
        return None
    body = "".join(log[begin + len(BEGIN):end].split())
    if len(body) > 2 * max_bytes + 4096:
        raise CmxError(f"k8s executor: the result frame is {len(body)} characters, over the bound of max_result_mb")
    try:
        data = json.loads(gzip.decompress(base64.b64decode(body, validate=True)))
        files = {str(k): base64.b64decode(v, validate=True) for k, v in dict(data["files"]).items()}
        return Frame(int(data["exit_code"]), files, str(data.get("error") or ""))
    except (binascii.Error, zlib.error, OSError, ValueError, KeyError, TypeError) as exc:
        raise CmxError(f"k8s executor: the pod log's result frame is damaged: {exc}") from None


def write_files(files: dict[str, bytes], directory: Path) -> None:
    """Write ``files`` under ``directory``, refusing paths that leave it."""
    root = directory.resolve()
    for name, data in files.items():
        target = (root / name).resolve()
        if root not in target.parents:
            raise CmxError(f"k8s executor: far file {name!r} is outside the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
