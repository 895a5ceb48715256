"""A dep's ``version:`` constraint chooses the highest fitting candidate, errs listing every
candidate when none fits, and ``cmx explain`` says which versions were seen and which won."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cmx_core.errors import ResolveError, UsageError
from cmx_core.run import engine

STEP = "steps:\n  - {uses: shell, with: {cmd: [echo, x]}}\n"


PYTHONS = ("3.9", "3.10", "3.12", "3.13")


def python_recipes(directory: Path, constraint: str, versions: tuple[str, ...] = PYTHONS) -> None:
    directory.mkdir(exist_ok=True)
    for version in versions:
        name = "py" + version.replace(".", "")
        (directory / f"{name}.yaml").write_text(
            f"name: {name}\nversion: '{version}'\ntags: [python]\nsummary: python {version}\n{STEP}")
    (directory / "app.yaml").write_text(
        f"name: app\ntags: [app]\nsummary: app\ndeps:\n  - {{tags: [python], version: '{constraint}'}}\n{STEP}")


def test_the_highest_fitting_version_is_chosen(tmp_path: Path) -> None:
    python_recipes(tmp_path, ">=3.10,<3.13")
    plan = engine.plan("app", recipes_dirs=[tmp_path])
    assert plan.root.deps == {"python": "py312"}  # 3.13 is excluded, 3.12 > 3.10 (not string order)


def test_a_1_10_version_is_not_1_1(tmp_path: Path) -> None:
    python_recipes(tmp_path, ">=1.9", versions=("1.9", "1.10", "1.2"))
    assert engine.plan("app", recipes_dirs=[tmp_path]).root.deps == {"python": "py110"}


def test_none_fitting_lists_every_candidate_and_version(tmp_path: Path) -> None:
    python_recipes(tmp_path, ">=4")
    with pytest.raises(ResolveError) as caught:
        engine.plan("app", recipes_dirs=[tmp_path])
    message = str(caught.value)
    assert "\n" not in message and "deps.0.version: no candidate fits" in message
    for name, version in (("py39", "3.9"), ("py310", "3.10"), ("py312", "3.12"), ("py313", "3.13")):
        assert f"{name} {version} does not satisfy '>=4'" in message


def test_a_bad_constraint_names_the_file_and_key(tmp_path: Path) -> None:
    python_recipes(tmp_path, "three-ish")
    with pytest.raises(UsageError, match=r"app.yaml:5: deps.0.version: invalid version range 'three-ish'"):
        engine.plan("app", recipes_dirs=[tmp_path])


def test_two_candidates_with_the_same_best_version_are_ambiguous(tmp_path: Path) -> None:
    python_recipes(tmp_path, ">=3", versions=("3.12", "3.12.0"))
    with pytest.raises(ResolveError, match=r"all have version 3\.12; add a tag"):
        engine.plan("app", recipes_dirs=[tmp_path])


def test_explain_says_which_versions_and_which_was_chosen(tmp_path: Path, cli: Callable[..., object]) -> None:
    python_recipes(tmp_path, ">=3.10,<3.13")
    result = cli("explain", "--tags=app", "--recipes", str(tmp_path), "--wide")  # a line a candidate
    text = result.out  # type: ignore[attr-defined]
    assert result.code == 0  # type: ignore[attr-defined]
    assert "taken    py312 [--recipes]: all tags match; version 3.12 satisfies '>=3.10,<3.13'; " \
           "the highest that does: chosen" in text
    assert "rejected py310 [--recipes]: all tags match; version 3.10 satisfies '>=3.10,<3.13'; " \
           "a higher one is chosen" in text
    assert "rejected py313 [--recipes]: all tags match; version 3.13 does not satisfy '>=3.10,<3.13'" in text
    assert "rejected py39 [--recipes]: all tags match; version 3.9 does not satisfy" in text
