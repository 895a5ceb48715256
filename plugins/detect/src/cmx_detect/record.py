"""``cmx detect --record DIR``: detect this machine and save every raw answer as a fixture.

:class:`RecordingSource` wraps :class:`LiveSource` and writes down what each question got —
command outputs, file contents, symlinks, directory listings, NVML calls, in-process values —
in the format :class:`cmx_detect.replay.FixtureSource` reads. Replaying the directory gives
the same facts (a test checks this on the machine it runs on). This is how a real GPU host
becomes a fixture.
"""

from __future__ import annotations

import json
import posixpath
import re
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cmx_detect.nvml import NvmlCallError, NvmlSession, RecordingNvml
from cmx_detect.source import DEFAULT_TIMEOUT_S, FileStat, LiveSource, ProbeResult, Source

RECORDED_ENV = ("PATH", "HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "DOCKER_HOST", "XDG_RUNTIME_DIR")
INLINE_MAX = 200


class RecordingSource(Source):
    """A live source that keeps a copy of every answer."""

    name = "live (recording)"

    def __init__(self, live: Source | None = None) -> None:
        self.live = live or LiveSource()
        self.env_seen: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self.commands: dict[str, dict[str, Any]] = {}
        self.outputs: dict[str, str] = {}
        self.files: dict[str, Any] = {}
        self.file_texts: dict[str, str] = {}
        self.nvml_spec: Any = None
        self.nvml_calls: dict[str, Any] = {}

    # -- helpers ---------------------------------------------------------------------------
    def _placeholder(self, path: str, entry: dict[str, Any]) -> None:
        if path not in self.files and path not in self.file_texts:
            self.files[path] = entry

    # -- Source ----------------------------------------------------------------------------
    def run(self, probe_id: str, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeResult:
        result = self.live.run(probe_id, argv, timeout_s)
        if result.timed_out:
            self.commands[probe_id] = {"timeout": True}
        elif result.error is None:
            name = re.sub(r"[^A-Za-z0-9._-]+", "_", probe_id).strip("_")[:80] + ".out"
            self.outputs[name] = result.stdout
            spec: dict[str, Any] = {"stdout": name, "rc": result.returncode}
            if result.stderr:
                spec["stderr_text"] = result.stderr[-2000:]
            self.commands[probe_id] = spec
        return result

    def read_text(self, path: str) -> str | None:
        text = self.live.read_text(path)
        if text is not None:
            self._record_realpath(path)
            self.file_texts[self.live.realpath(path)] = text
            self.files.pop(self.live.realpath(path), None)
        return text

    def env(self, name: str) -> str | None:
        value = self.live.env(name)
        if value is not None:
            self.env_seen[name] = value
        return value

    def which_all(self, name: str) -> list[str]:
        self.env("PATH")
        found = self.live.which_all(name)
        for path in found:
            self._record_realpath(path)
            self._placeholder(self.live.realpath(path), {"text": ""})
        return found

    def _record_realpath(self, path: str) -> None:
        real = self.live.realpath(path)
        if real != posixpath.normpath(path):
            self.files[posixpath.normpath(path)] = {"symlink": real}

    def realpath(self, path: str) -> str:
        self._record_realpath(path)
        return self.live.realpath(path)

    def is_file(self, path: str) -> bool:
        hit = self.live.is_file(path)
        if hit:
            self._record_realpath(path)
            self._placeholder(self.live.realpath(path), {"text": ""})
        return hit

    def is_dir(self, path: str) -> bool:
        hit = self.live.is_dir(path)
        if hit:
            self._record_realpath(path)
            self._placeholder(self.live.realpath(path), {"dir": True})
        return hit

    def listdir(self, path: str) -> list[str]:
        names = self.live.listdir(path)
        for name in names:
            child = posixpath.join(path, name)
            if name.startswith(("cuda", "nvidia", "kfd")):
                self.is_dir(child) or self.is_file(child)
        return names

    def stat(self, path: str) -> FileStat | None:
        st = self.live.stat(path)
        if st is not None:
            self.is_dir(path) or self.is_file(path)
        return st

    def value(self, key: str, compute: Callable[[], Any]) -> Any:
        self.values[key] = self.live.value(key, compute)
        return self.values[key]

    def nvml(self) -> NvmlSession:
        try:
            session = self.live.nvml()
        except NvmlCallError as err:
            self.nvml_spec = {"error": err.name, "message": str(err), "value": err.value}
            raise
        self.nvml_spec = "nvml.json"
        return RecordingNvml(session, self.nvml_calls)

    # -- saving ----------------------------------------------------------------------------
    def save(self, directory: Path, description: str | None = None) -> Path:
        """Write the fixture (``fixture.json`` and the raw outputs) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        files: dict[str, Any] = dict(self.files)
        for i, (path, text) in enumerate(sorted(self.file_texts.items())):
            if len(text) <= INLINE_MAX:
                files[path] = {"text": text}
            else:
                name = f"file-{i:02d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', path).strip('_')[-60:]}"
                (directory / name).write_text(text, encoding="utf-8")
                files[path] = name
        for name, text in self.outputs.items():
            (directory / name).write_text(text, encoding="utf-8")
        manifest: dict[str, Any] = {
            "description": description or f"recorded by cmx detect --record on {socket.gethostname()}",
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "env": {k: v for k, v in self.env_seen.items() if k in RECORDED_ENV},
            "values": self.values, "commands": self.commands, "files": dict(sorted(files.items())),
        }
        if isinstance(self.nvml_spec, str):
            (directory / "nvml.json").write_text(json.dumps(
                {"recorded_with": "cmx detect --record", "calls": self.nvml_calls}, indent=1) + "\n")
        if self.nvml_spec is not None:
            manifest["nvml"] = self.nvml_spec
        (directory / "fixture.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return directory
