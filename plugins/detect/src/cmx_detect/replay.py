"""Recorded machines: a fixture directory answers the questions a :class:`Source` asks.

A fixture is a directory with ``fixture.json``::

    {
      "description": "8x H100 SXM5 80GB, NVLink, driver 550.54.15",
      "env": {"PATH": "/usr/local/cuda/bin:/usr/bin"},
      "values": {"uname": {...}, "libc": "glibc 2.35", "python": {...}},
      "commands": {"nvidia-smi-query-gpu": {"stdout": "nvidia-smi-query-gpu.csv", "rc": 0},
                   "docker-version": {"stdout_text": "...", "rc": 1, "stderr_text": "..."},
                   "hangs": {"timeout": true}},
      "files": {"/proc/driver/nvidia/version": "proc-driver-nvidia-version.txt",
                "/usr/bin/nvidia-smi": {"text": ""},
                "/usr/local/cuda": {"symlink": "/usr/local/cuda-12.4"}},
      "nvml": "nvml.json"
    }

``files`` is a small virtual file system (a value is a fixture file name, ``{"text": ...}``
or ``{"symlink": target}``; parent directories exist implicitly). ``nvml`` names a recording
of pynvml calls (see :mod:`cmx_detect.nvml`) or is an ``{"error": ...}`` object; absent means
"NVML Shared Library Not Found". A command that is not recorded behaves as not installed.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cmx_detect.convert import FactsError
from cmx_detect.nvml import NvmlCallError, NvmlSession, RecordedNvml
from cmx_detect.source import DEFAULT_TIMEOUT_S, FileStat, ProbeResult, Source

MANIFEST = "fixture.json"
_KEYS = {"description", "env", "values", "commands", "files", "nvml", "hardware", "recorded"}


def bundled_fixtures_dir() -> Path:
    return Path(__file__).parent / "fixtures"


def bundled_fixture_names() -> list[str]:
    return sorted(p.parent.name for p in bundled_fixtures_dir().glob(f"*/{MANIFEST}"))


def resolve_fixture(spec: str) -> Path:
    """A fixture directory from a path (directory or its ``fixture.json``) or a bundled name."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path.parent
    if path.is_dir():
        return path
    bundled = bundled_fixtures_dir() / spec
    if (bundled / MANIFEST).is_file():
        return bundled
    known = ", ".join(bundled_fixture_names())
    raise FactsError(f"--replay {spec}: no such fixture directory or file; bundled fixtures: {known}")


class FixtureSource(Source):
    """Answers from a fixture directory. ``hide`` names commands/NVML to treat as absent
    (tests use it to exercise fallbacks on the same recording)."""

    def __init__(self, directory: Path, hide: Sequence[str] = ()) -> None:
        self.directory = Path(directory)
        self.manifest_path = self.directory / MANIFEST
        self.name = f"replay:{self.directory.name}"
        self._hide = set(hide)
        self._m = _load_manifest(self.manifest_path)
        self._files: dict[str, Any] = dict(self._m.get("files", {}))
        self._dirs = _implied_dirs(self._files)

    # -- helpers ---------------------------------------------------------------------------
    def _read_fixture_file(self, name: str, key: str) -> str:
        path = self.directory / name
        try:
            return path.read_text(encoding="utf-8")
        except OSError as err:
            raise FactsError(f"{self.manifest_path}: {key}: cannot read {name}: {err.strerror}") from None

    def _entry(self, path: str) -> Any:
        return self._files.get(posixpath.normpath(path))

    # -- Source ----------------------------------------------------------------------------
    def run(self, probe_id: str, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeResult:
        args = tuple(str(a) for a in argv)
        spec = self._m.get("commands", {}).get(probe_id)
        if spec is None or probe_id in self._hide:
            return ProbeResult(args, None, "", "", error=f"cannot run {args[0]}: not found")
        if spec.get("timeout"):
            return ProbeResult(args, None, "", "", timed_out=True,
                               error=f"{posixpath.basename(args[0])} timed out after {timeout_s:g} s")
        key = f"commands.{probe_id}"
        stdout = spec.get("stdout_text", "")
        if "stdout" in spec:
            stdout = self._read_fixture_file(spec["stdout"], key)
        return ProbeResult(args, int(spec.get("rc", 0)), stdout, spec.get("stderr_text", ""))

    def read_text(self, path: str) -> str | None:
        real = self.realpath(path)
        entry = self._entry(real)
        if entry is None:
            return None
        if isinstance(entry, str):
            return self._read_fixture_file(entry, f"files.{path}")
        text = entry.get("text") if isinstance(entry, dict) else None
        return text if isinstance(text, str) else None

    def env(self, name: str) -> str | None:
        value = self._m.get("env", {}).get(name)
        return str(value) if value is not None else None

    def which_all(self, name: str) -> list[str]:
        if name in self._hide:
            return []
        found = []
        for directory in (self.env("PATH") or "").split(":"):
            candidate = posixpath.join(directory, name)
            if directory and self.is_file(candidate) and candidate not in found:
                found.append(candidate)
        return found

    def realpath(self, path: str) -> str:
        parts = posixpath.normpath(path).split("/")[1:]
        current = "/"
        for depth, part in enumerate(parts):
            current = posixpath.join(current, part)
            entry = self._files.get(current)
            if isinstance(entry, dict) and "symlink" in entry:
                target = posixpath.join(posixpath.dirname(current), entry["symlink"])
                rest = "/".join(parts[depth + 1:])
                return self.realpath(posixpath.join(target, rest) if rest else target)
        return current

    def is_file(self, path: str) -> bool:
        entry = self._entry(self.realpath(path))
        return entry is not None and not (isinstance(entry, dict) and ("symlink" in entry or entry.get("dir")))

    def is_dir(self, path: str) -> bool:
        return self.realpath(path) in self._dirs

    def listdir(self, path: str) -> list[str]:
        real = self.realpath(path).rstrip("/") or "/"
        names = {p[len(real):].lstrip("/").split("/")[0] for p in list(self._files) + list(self._dirs)
                 if p.startswith(real + "/") or (real == "/" and p != "/")}
        return sorted(n for n in names if n)

    def stat(self, path: str) -> FileStat | None:
        if not self.is_file(path):
            return None
        return FileStat(len(self.read_text(path) or ""), 0)

    def value(self, key: str, compute: Callable[[], Any]) -> Any:
        values = self._m.get("values", {})
        if key not in values:
            raise FactsError(f"{self.manifest_path}: values.{key}: missing (needed by this detector)")
        return values[key]

    def nvml(self) -> NvmlSession:
        spec = self._m.get("nvml")
        if spec is None or "nvml" in self._hide:
            raise NvmlCallError("NVMLError_LibraryNotFound", "NVML Shared Library Not Found", 12)
        if isinstance(spec, dict):
            return RecordedNvml({"nvmlInit()": spec})
        text = self._read_fixture_file(spec, "nvml")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise FactsError(f"{self.directory / spec}: not valid JSON ({err.msg} at line {err.lineno})") from None
        if not isinstance(data, dict) or not isinstance(data.get("calls"), dict):
            raise FactsError(f"{self.directory / spec}: expected an object with a 'calls' mapping")
        return RecordedNvml(data["calls"])


def _load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise FactsError(f"{path}: cannot read fixture manifest: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise FactsError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
    if not isinstance(data, dict):
        raise FactsError(f"{path}: a fixture manifest must be a JSON object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise FactsError(f"{path}: unknown key '{unknown[0]}' (allowed: {', '.join(sorted(_KEYS))})")
    for key in ("env", "values", "commands", "files"):
        if not isinstance(data.get(key, {}), dict):
            raise FactsError(f"{path}: {key}: must be an object")
    return data


def _implied_dirs(files: dict[str, Any]) -> set[str]:
    dirs = {"/"}
    for path, entry in files.items():
        if isinstance(entry, dict) and entry.get("dir"):
            dirs.add(path)
        parent = posixpath.dirname(path)
        while parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    return dirs
