"""Shared fixtures for cmx-core's tests: an isolated cmx home and a CLI runner."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmx_core.cli.main import main
from cmx_core.plugins.loader import reset_registry


@pytest.fixture(autouse=True)
def cmx_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own cache and data directories."""
    home = tmp_path_factory.mktemp("cmx-home")
    monkeypatch.setenv("CMX_HOME", str(home))
    for name in ("CMX_RECIPES_PATH", "CMX_CACHE_DIR", "CMX_DATA_DIR", "CMX_STRICT_PLUGINS", "CMX_STRICT",
                 "CMX_DISABLE_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    reset_registry()
    yield home
    reset_registry()


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``cmx ARGS`` in-process; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:  # argparse's --help and --version
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def recipes(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a recipe file into a fresh ``--recipes`` directory; returns its path."""
    directory = tmp_path / "recipes"
    directory.mkdir()

    def write(name: str, text: str) -> Path:
        path = directory / f"{name}.yaml"
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    write.dir = directory  # type: ignore[attr-defined]
    return write


@pytest.fixture
def require() -> Callable[[str | None, str], None]:
    """``require(problem, what)``: where ``problem`` says why ``what`` cannot run here, the test
    fails in CI (which must run everything) and is skipped elsewhere; None lets it run."""

    def check(problem: str | None, what: str) -> None:
        if problem is None:
            return
        if os.environ.get("CI"):
            pytest.fail(f"{what} required in CI: {problem}")
        pytest.skip(problem)

    return check
