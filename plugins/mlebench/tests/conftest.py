"""Shared fixtures: the three offline competitions built once per session (real scikit-learn
data, real baseline pool), and bubblewrap installed when root (as scripts/install.sh --test does)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from cmx_mlebench.competition import Competition
from cmx_mlebench.offline import BUILTIN
from cmx_mlebench.prepare import Prepared, build


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Prepared]:
    root = tmp_path_factory.mktemp("offline")
    return {c: build(c, root / c) for c in BUILTIN}


@pytest.fixture
def competition(built: dict[str, Prepared]) -> Competition:
    return built["sklearn-digits"].competition


def _have_bwrap() -> bool:
    if shutil.which("bwrap"):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"], check=False, capture_output=True, timeout=300)
    return shutil.which("bwrap") is not None


@pytest.fixture(scope="session")
def bwrap() -> Iterator[None]:
    if not _have_bwrap():
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is needed for the sandboxed agent runs (apt-get install bubblewrap)")
        pytest.skip("bubblewrap is not installed and cannot be installed here (not root)")
    yield


