"""Shared fixtures of cmx-detect's tests."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


@pytest.fixture
def cmx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private CMX_HOME so the fact cache and runs never touch the user's."""
    home = tmp_path / "cmx-home"
    monkeypatch.setenv("CMX_HOME", str(home))
    for var in ("CMX_CACHE_DIR", "CMX_DATA_DIR", "CMX_OVERRIDE_ACCELERATOR", "CMX_OVERRIDE_CUDA"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CMX_OVERRIDE_ACCELERATOR", raising=False)
    monkeypatch.delenv("CMX_OVERRIDE_CUDA", raising=False)


def write_exe(path: Path, text: str) -> Path:
    """An executable script at ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def exe():
    return write_exe


@pytest.fixture
def only_path(monkeypatch: pytest.MonkeyPatch):
    """Put ``dirs`` (then the system dirs for sh/sleep) on PATH."""
    def _set(*dirs: Path) -> None:
        monkeypatch.setenv("PATH", os.pathsep.join([*map(str, dirs), "/usr/bin", "/bin"]))
    return _set
