"""Packaging of cmx-mlperf: the declared ranges and the environment the suite runs in.

The ``llm`` extra's floor is transformers 4.56 (the ``dtype=`` keyword of ``from_pretrained``
that ``llm/model_dir.py`` uses); cmx-core is pinned to the 0.1 series.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def _by_name(texts: list[str]) -> dict[str, Requirement]:
    return {Requirement(t).name.lower(): Requirement(t) for t in texts}


def test_llm_extra_requires_transformers_456_or_newer() -> None:
    spec = _by_name(_project()["optional-dependencies"]["llm"])["transformers"].specifier
    assert "4.55.4" not in spec and "4.40.0" not in spec
    assert "4.56.0" in spec and "5.24.0" in spec


def test_cmx_core_range_is_the_01_series() -> None:
    spec = _by_name(_project()["dependencies"])["cmx-core"].specifier
    assert "0.1.0" in spec and "0.1.9" in spec
    assert "0.2.0" not in spec and "0.0.9" not in spec


def test_installed_packages_satisfy_the_llm_extra() -> None:
    for name, req in _by_name(_project()["optional-dependencies"]["llm"]).items():
        installed = metadata.version(name)
        assert req.specifier.contains(installed, prereleases=True), f"{name} {installed} vs {req}"


def test_installed_metadata_matches_pyproject() -> None:
    """A stale editable install (metadata of an older pyproject) would test other ranges."""
    project = _project()
    declared = {(r.name.lower(), str(r.specifier), "") for r in map(Requirement, project["dependencies"])}
    for extra, texts in project["optional-dependencies"].items():
        declared |= {(r.name.lower(), str(r.specifier), extra) for r in map(Requirement, texts)}
    installed = set()
    for text in metadata.requires("cmx-mlperf") or []:
        req = Requirement(text)
        extra = next(
            (e for e in project["optional-dependencies"] if req.marker and req.marker.evaluate({"extra": e})), ""
        )
        installed.add((req.name.lower(), str(req.specifier), extra))
    assert installed == declared
