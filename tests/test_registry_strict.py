"""`cmx registry check` catches a key written twice, a misspelt distribution (the entry was
silently skipped) and a community entry whose cmx_core range differs from the installed
plugin's published requirement."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cmx_core.cli.registry_cmd import check_registry
from cmx_core.plugins import loader as plugins

ENTRY = """\
schema_version: 1
plugins:
  - name: cmx-fake
    distribution: {dist}
    summary: a community plugin
    source: {{index: cmx-fake}}
    provides:
      steps: [fake.one]
    cmx_core: "{core}"
    state: incubating
    license: MIT
    maintainers: [{{name: Tess}}]
"""

MODULE = """\
from cmx_core.api import StepType, hookimpl


@hookimpl
def cmx_register_steps(register):
    register(StepType(name="fake.one", summary="fake", run=lambda ctx: {}))
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cmx-fake 1.0.0, requiring cmx-core>=0.1,<0.2, as importlib.metadata sees an installed one."""
    site = tmp_path / "site"
    (site / "cmx_fake").mkdir(parents=True)
    (site / "cmx_fake" / "__init__.py").write_text("", encoding="utf-8")
    (site / "cmx_fake" / "plugin.py").write_text(MODULE, encoding="utf-8")
    info = site / "cmx_fake-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cmx-fake\nVersion: 1.0.0\n"
                                   "Requires-Dist: cmx-core>=0.1,<0.2\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[cmx]\nfake = cmx_fake.plugin\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "fake")
    registry = plugins.load_registry()
    assert registry.plugins["fake"].error is None, registry.plugins["fake"].error
    monkeypatch.setattr(plugins, "_REGISTRY", registry)


def _check(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "registry.yaml"
    path.write_text(text, encoding="utf-8")
    return [str(p) for p in check_registry(path).problems]


def test_the_matching_entry_passes(installed: None, tmp_path: Path) -> None:
    assert _check(tmp_path, ENTRY.format(dist="cmx-fake", core=">=0.1,<0.2")) == []


def test_a_community_range_that_differs_from_the_published_one(installed: None, tmp_path: Path) -> None:
    problems = _check(tmp_path, ENTRY.format(dist="cmx-fake", core=">=0.1,<0.3"))
    assert problems == [f"{tmp_path / 'registry.yaml'}: entry 'cmx-fake' key 'cmx_core': '>=0.1,<0.3' differs from "
                        "the requirement cmx-core<0.2,>=0.1 that cmx-fake 1.0.0 publishes; make them equal"]


def test_a_misspelt_distribution_is_refused_not_skipped(installed: None, tmp_path: Path) -> None:
    problems = _check(tmp_path, ENTRY.format(dist="cmx-fakes", core=">=0.1,<0.2"))
    assert len(problems) == 1
    assert "key 'distribution': 'cmx-fakes' is not installed, but cmx-fake 1.0.0 (installed, in no entry)" \
        in problems[0]
    assert "registers fake.one, which this entry claims; is 'distribution' misspelt?" in problems[0]


def test_a_key_written_twice(tmp_path: Path) -> None:
    text = ENTRY.format(dist="cmx-fake", core=">=0.1,<0.2").replace(
        "    state: incubating\n", "    state: incubating\n    state: stable\n")
    problems = _check(tmp_path, text)
    assert problems == [f"{tmp_path / 'registry.yaml'}:11: key 'state': 'state' is written twice "
                        "(lines 10 and 11); keep one"]
    nested = textwrap.dedent(ENTRY.format(dist="cmx-fake", core=">=0.1,<0.2")).replace(
        "      steps: [fake.one]\n", "      steps: [fake.one]\n      steps: [fake.two]\n")
    assert any("'steps' is written twice" in p for p in _check(tmp_path, nested))
