"""Facts: what detectors report about the machine, read lazily and cached on disk.

A fact is computed only when something reads it (a ``when`` condition, a ``requires``
check, a template, the result's ``system`` section). Detector results are cached in
``<cache>/facts/<name>.json`` for the detector's ``ttl_s`` and invalidated when its
``fingerprint()`` or version changes. With a facts file (``--facts FILE``, the JSON that
``cmx detect --json`` prints) the local machine is not probed at all.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core import paths, reads
from cmx_core.datautil import JSONLimitError, atomic_write, digest, loads_bounded, read_bounded, to_plain
from cmx_core.errors import CmxError, ResolveError
from cmx_core.providers.refs import reference
from cmx_core.providers.table import ProviderTable
from cmx_core.providers.types import Detector

SYSTEM_FACTS = ("host", "os", "cpu", "memory", "python", "gpus", "accelerator", "cuda", "torch", "container")
"""Facts that feed every result's ``system`` and ``software`` sections, when detectable."""


class FactStore:
    """Lazy, caching access to facts; records which paths were read (for cache keys)."""

    def __init__(self, detectors: Mapping[str, Detector], file_facts: Mapping[str, Any] | None = None,
                 source: str = "local", use_cache: bool = True) -> None:
        self.detectors = detectors
        self.file_facts = file_facts
        self.source = source
        self.use_cache = use_cache
        self._values: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.used: dict[str, tuple[Detector, str, Any]] = {}
        """Each detector this store consulted, the fingerprint its value was valid for and the
        value (what the warm-run replay must check again; see :mod:`cmx_core.run.replay_record`)."""

    @classmethod
    def from_file(cls, path: Path, detectors: Mapping[str, Detector] | None = None) -> FactStore:
        """Facts from a saved file; the local machine is not probed (detectors are kept only
        to validate ``requires`` values). ``CMX_OVERRIDE_*`` variables do not apply."""
        return cls(detectors or {}, load_facts_file(path), source=str(path))

    def check_requirement(self, name: str, value: Any, where: str) -> None:
        """Let the fact's detector validate a ``requires`` value (e.g. an accelerator tag)."""
        detector = self.detectors.get(name)
        if detector is not None and detector.check is not None:
            for item in value if isinstance(value, list) else [value]:
                detector.check(item, where)

    def available(self) -> list[str]:
        names = set(self.file_facts) if self.file_facts is not None else set(self.detectors)
        return sorted(names)

    def get(self, name: str) -> Any:
        """The value of fact ``name``; a ResolveError if nothing provides it."""
        if name not in self._values:
            self._values[name] = self._compute(name)
        return self._values[name]

    def get_path(self, name: str) -> Any:
        """Hook for the expression evaluator: ``facts.<name>``."""
        return self.get(name)

    def try_get(self, name: str) -> Any:
        """Like :meth:`get` but None when no detector provides the fact."""
        try:
            return self.get(name)
        except ResolveError:
            return None

    def _compute(self, name: str) -> Any:
        if self.file_facts is not None:
            if name not in self.file_facts:
                raise ResolveError(f"fact '{name}' is not in the facts file {self.source}")
            reads.refuse("facts come from a facts file")
            return self.file_facts[name]
        detector = self.detectors.get(name)
        if detector is None:
            raise ResolveError(_no_detector(name, self.detectors))
        return self._detect(detector)

    def _detect(self, detector: Detector) -> Any:
        cache_file = fact_cache_file(detector.name)
        fingerprint = _fingerprint(detector)
        if self.use_cache and detector.ttl_s:
            cached = _read_cached(cache_file, detector, fingerprint)
            if cached is not None:
                self.used[detector.name] = (detector, fingerprint, cached["value"])
                _report_read(detector, fingerprint, cached["value"], cache_file, float(cached.get("created", 0)))
                return cached["value"]
        try:
            value = to_plain(detector.detect())
        except CmxError:
            raise  # bad input the detector reports (e.g. a malformed override variable)
        except Exception as exc:  # noqa: BLE001 - a buggy detector must not stop the run
            self.errors[detector.name] = f"{type(exc).__name__}: {exc}"
            print(f"cmx: warning: detector '{detector.name}' ({detector.plugin}) failed: {exc}", file=sys.stderr)
            reads.refuse(f"detector {detector.name} failed")
            return None
        if detector.ttl_s:
            _write_cached(cache_file, detector, fingerprint, value)
        self.used[detector.name] = (detector, fingerprint, value)
        _report_read(detector, fingerprint, value, cache_file, time.time())
        return value

    def snapshot(self, names: tuple[str, ...] = SYSTEM_FACTS) -> dict[str, Any]:
        """The named facts that can be had (missing ones are left out)."""
        result = {}
        for name in names:
            if name in self.available():
                result[name] = self.try_get(name)
        return result


def _report_read(detector: Detector, fingerprint: str, value: Any, cache_file: Path, created: float) -> None:
    """Tell the read recorder how a later process can check this fact again: through its
    fingerprint function (a cached fact, whose cache file and expiry count too), or by
    detecting it again and comparing digests."""
    if reads.active() is None:
        return

    name = detector.name
    if detector.ttl_s:
        ref = reference(detector.fingerprint) if detector.fingerprint else None
        if detector.fingerprint is not None and ref is None:
            reads.refuse(f"fact {name}: fingerprint function cannot be found by name")
        if fingerprint.startswith("error:"):
            reads.refuse(f"fact {name}: fingerprint failed")
        reads.fact(name, {"fingerprint_ref": ref, "fingerprint": fingerprint})
        reads.file(cache_file)
        reads.deadline(created + float(detector.ttl_s))
        return
    ref = reference(detector.detect)
    if ref is None:
        reads.refuse(f"fact {name}: detect function cannot be found by name")
    reads.fact(name, {"detect_ref": ref, "digest": digest(value)})


def _no_detector(name: str, detectors: Mapping[str, Detector]) -> str:
    """One line saying no detector provides ``name`` and, when the detectors came from a
    registry (a :class:`ProviderTable`), which plugin in registry.yaml would."""
    hint = detectors.missing_hint(name) if isinstance(detectors, ProviderTable) else ""
    return f"no loaded plugin provides fact '{name}'" + (f"; {hint}" if hint else "")


def fact_cache_file(name: str) -> Path:
    return paths.cache_dir() / "facts" / f"{name}.json"


def _fingerprint(detector: Detector) -> str:
    if detector.fingerprint is None:
        return ""
    try:
        return str(detector.fingerprint())
    except Exception:  # noqa: BLE001 - an unreadable fingerprint just means "recompute"
        return f"error:{time.time()}"


def _read_cached(path: Path, detector: Detector, fingerprint: str) -> dict[str, Any] | None:
    try:
        record = loads_bounded(read_bounded(path))
    except (OSError, ValueError):  # a JSONLimitError is a ValueError: detect again
        return None
    if not isinstance(record, dict):
        return None
    fresh = time.time() - float(record.get("created", 0)) < float(detector.ttl_s or 0)
    same = record.get("fingerprint") == fingerprint and record.get("version") == detector.version \
        and record.get("plugin") == detector.plugin
    return record if fresh and same and "value" in record else None


def _write_cached(path: Path, detector: Detector, fingerprint: str, value: Any) -> None:
    record = {"plugin": detector.plugin, "version": detector.version, "fingerprint": fingerprint,
              "created": time.time(), "value": value}
    try:
        atomic_write(path, json.dumps(record))
    except OSError as exc:
        print(f"cmx: warning: cannot cache fact '{detector.name}': {exc.strerror}", file=sys.stderr)


def load_facts_file(path: Path) -> dict[str, Any]:
    """Read a facts file (``{"facts": {...}}``); one-line errors for anything malformed."""
    try:
        text = read_bounded(path).decode()
    except OSError as exc:
        raise CmxError(f"--facts {path}: cannot read: {exc.strerror}") from None
    except JSONLimitError as exc:
        raise CmxError(f"--facts {path}: refused: the file {exc}") from None
    except UnicodeDecodeError:
        raise CmxError(f"--facts {path}: not a facts file (not UTF-8 text)") from None
    try:
        doc = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise CmxError(f"--facts {path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except JSONLimitError as exc:
        raise CmxError(f"--facts {path}: refused: the file {exc}") from None
    facts = doc.get("facts") if isinstance(doc, dict) else None
    if not isinstance(facts, dict):
        raise CmxError(f"--facts {path}: expected a JSON object with a 'facts' object "
                       "(the output of 'cmx detect --json')")
    return facts
