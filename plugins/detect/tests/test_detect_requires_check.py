"""Core's requires check asks cmx-detect to validate accelerator tags; override errors
reach the user as one-line errors instead of "this machine has: none"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.testing.cli import main
from cmx_core.testing.registry import reset_registry


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CMX_OVERRIDE_ACCELERATOR", raising=False)
    reset_registry()


def _recipe(tmp_path: Path, tag: str) -> Path:
    directory = tmp_path / "recipes"
    directory.mkdir(exist_ok=True)
    (directory / "g.yaml").write_text(f"name: g\ntags: [g]\nsummary: g\nrequires: {{accelerator: {tag}}}\n")
    return directory


def test_unknown_accelerator_tag_in_a_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--tags=g", "--recipes", str(_recipe(tmp_path, "h10"))])
    err = capsys.readouterr().err
    assert code == 2
    assert "requires.accelerator: unknown accelerator tag 'h10'" in err and "h100" in err


def test_known_tag_fails_here_and_passes_with_an_override(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    recipes = _recipe(tmp_path, "h100")
    assert main(["plan", "--tags=g", "--recipes", str(recipes)]) == 2
    assert "requires accelerator h100; this machine has: none" in capsys.readouterr().err
    monkeypatch.setenv("CMX_OVERRIDE_ACCELERATOR", "8xh100")
    reset_registry()
    assert main(["plan", "--tags=g", "--recipes", str(recipes)]) == 0


def test_bad_override_is_an_error_not_none(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_OVERRIDE_ACCELERATOR", "bogus")
    code = main(["plan", "--tags=g", "--recipes", str(_recipe(tmp_path, "h100"))])
    err = capsys.readouterr().err
    assert code == 2 and "CMX_OVERRIDE_ACCELERATOR=bogus: unknown accelerator tag 'bogus'" in err
