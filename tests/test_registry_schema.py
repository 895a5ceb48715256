"""registry.yaml: the real file is valid; bad entries are refused naming entry, key and line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from cmx_core.plugins.registry_yaml import SCHEMA_PATH, RegistryError, read_registry, registry_path, validate_file

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
schema_version: 1
plugins:
  - name: cmx-acme
    distribution: cmx-acme
    summary: ACME things
    source: {index: cmx-acme, version: ">=1.0,<2"}
    provides:
      steps: [acme.run]
      recipes: ["acme,*"]
    cmx_core: ">=0.1,<0.2"
    state: stable
    license: MIT
    maintainers: [{name: Ann, github: ann}]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "registry.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(tmp_path: Path, text: str) -> list[str]:
    return [str(p) for p in validate_file(_write(tmp_path, text))[0]]


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))


def test_the_repository_registry_is_valid_and_found_next_to_the_checkout() -> None:
    assert registry_path() == ROOT / "registry.yaml"
    registry = read_registry()
    names = {e.name for e in registry.entries}
    assert {"cmx-detect", "cmx-docker", "cmx-mlperf", "cmx-textstats"} <= names


def test_every_in_tree_plugin_has_an_entry() -> None:
    registry = read_registry()
    listed = {e.source.path for e in registry.entries if e.source.path}
    on_disk = {f"plugins/{p.parent.name}" for p in ROOT.glob("plugins/*/pyproject.toml")}
    assert on_disk <= listed, f"in-tree plugins missing from registry.yaml: {on_disk - listed}"


def test_cmx_registry_env_var_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, GOOD)
    monkeypatch.setenv("CMX_REGISTRY", str(path))
    assert [e.name for e in read_registry().entries] == ["cmx-acme"]
    monkeypatch.setenv("CMX_REGISTRY", str(tmp_path / "missing.yaml"))
    with pytest.raises(RegistryError, match=r"CMX_REGISTRY=.*missing\.yaml: no such file"):
        registry_path()


def test_a_good_community_entry_passes(tmp_path: Path) -> None:
    assert _problems(tmp_path, GOOD) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("    license: MIT\n", "    license: MIT\n    licence: MIT\n",
         r":13: entry 'cmx-acme' key 'licence': unknown key 'licence' \(allowed: cmx_core, "),
        ("    state: stable\n", "", r"entry 'cmx-acme': 'state' is a required property"),
        ("state: stable", "state: beta", r":11: entry 'cmx-acme' key 'state': 'beta' is not one of"),
        ("steps: [acme.run]", "steps: acme.run",
         r":8: entry 'cmx-acme' key 'provides.steps': 'acme.run' is not of type 'array'"),
        ("steps: [acme.run]", "steps: [Acme Run]", r"key 'provides.steps.0': 'Acme Run' does not match"),
        ('source: {index: cmx-acme, version: ">=1.0,<2"}',
         'source: {index: cmx-acme, path: plugins/acme}',
         r":6: entry 'cmx-acme' key 'source': needs exactly one of 'path' or 'index'"),
        ('cmx_core: ">=0.1,<0.2"', 'cmx_core: "0.1"', r"key 'cmx_core': '0.1' does not match"),
        ('recipes: ["acme,*"]', 'recipes: ["acme,*,x"]', r"key 'provides.recipes.0'"),
        ("maintainers: [{name: Ann, github: ann}]", "maintainers: []",
         r"key 'maintainers': \[\] should be non-empty"),
        ("schema_version: 1", "schema_version: 2", r"key 'schema_version': 1 was expected"),
    ],
)
def test_schema_errors_name_the_entry_key_and_line(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in GOOD
    problems = _problems(tmp_path, GOOD.replace(old, new))
    assert problems, "the broken entry was accepted"
    assert any(__import__("re").search(expected, p) for p in problems), problems


def test_an_entry_without_a_name_is_named_by_position(tmp_path: Path) -> None:
    problems = _problems(tmp_path, GOOD.replace("  - name: cmx-acme\n    distribution", "  - distribution"))
    assert any("entry '#1'" in p and "'name' is a required property" in p for p in problems)


def _second(name: str = "cmx-other", **changes: str) -> str:
    entry = GOOD.split("plugins:\n", 1)[1].replace("cmx-acme", name)
    for old, new in changes.items():
        entry = entry.replace(old, new)
    return entry


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (_second("cmx-acme"), "entry 'cmx-acme' key 'name': 'cmx-acme' is listed twice"),
        (_second() + "    requires_plugins: [cmx-nope]\n",
         "key 'requires_plugins': 'cmx-nope' is not an entry of this registry"),
        (_second(**{"state: stable": "state: deprecated"}),
         "key 'deprecated_by': a deprecated entry names its replacement"),
        (_second(**{'cmx_core: ">=0.1,<0.2"': 'cmx_core: ">=9"'}),
         "key 'cmx_core': '>=9' excludes this cmx-core 0.1.0; update the entry"),
        (_second(**{'version: ">=1.0,<2"': 'version: ">=1.0,<two"'}),
         "key 'source.version': '>=1.0,<two' is not a PEP 440 specifier set"),
    ],
)
def test_consistency_problems(tmp_path: Path, extra: str, expected: str) -> None:
    problems = _problems(tmp_path, GOOD + extra)
    assert any(expected in p for p in problems), problems


def test_in_tree_entries_are_checked_against_their_pyproject(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "acme"
    plugin.mkdir(parents=True)
    (plugin / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "acme-cmx"
        version = "1.0"
        dependencies = ["cmx-core>=0.1,<0.3", "cmx-other>=1"]
        """), encoding="utf-8")
    text = GOOD.replace('source: {index: cmx-acme, version: ">=1.0,<2"}',
                        "source: {path: plugins/acme}") + _second()
    problems = _problems(tmp_path, text)
    assert any("key 'distribution'" in p and "builds 'acme-cmx', not 'cmx-acme'" in p
               for p in problems), problems
    assert any("declares no [project.entry-points.cmx]" in p for p in problems), problems
    assert any("'>=0.1,<0.2' differs from the plugin's requirement cmx-core<0.3,>=0.1" in p
               for p in problems), problems
    assert any("depends on plugin 'cmx-other'; list it here" in p for p in problems), problems
    missing = _problems(tmp_path, text.replace("plugins/acme", "plugins/gone"))
    assert any("key 'source.path'" in p and "plugins/gone/pyproject.toml does not exist" in p
               for p in missing), missing


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("state: stable", "state: [stable"))
    with pytest.raises(RegistryError, match=r"registry.yaml:\d+: invalid YAML"):
        read_registry(path)


def test_read_registry_raises_the_first_problem_and_counts_the_rest(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("state: stable", "state: beta").replace(
        "license: MIT", "license: ''"))
    with pytest.raises(RegistryError, match=r"entry 'cmx-acme' key .*\(and 1 more; run `cmx registry check`\)"):
        read_registry(path)


def test_the_schema_documents_every_key_the_loader_reads() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    entry_keys = set(schema["$defs"]["entry"]["properties"])
    data = yaml.safe_load((ROOT / "registry.yaml").read_text())
    used = {k for item in data["plugins"] for k in item}
    assert used <= entry_keys


@pytest.mark.parametrize("project", sorted(ROOT.glob("plugins/*/pyproject.toml")) + sorted(
    ROOT.glob("examples/*/pyproject.toml")), ids=lambda p: p.parent.name)
def test_every_in_tree_plugin_is_a_separate_package(project: Path) -> None:
    """Own pyproject (version, cmx entry point, cmx-core through a range), README and tests."""
    import tomllib
    from packaging.requirements import Requirement

    meta = tomllib.loads(project.read_text(encoding="utf-8"))["project"]
    directory = project.parent
    assert meta.get("version"), f"{project}: no version"
    assert meta.get("entry-points", {}).get("cmx"), f"{project}: no [project.entry-points.cmx]"
    core = [Requirement(d) for d in meta.get("dependencies", [])
            if Requirement(d).name == "cmx-core"]
    assert core and core[0].specifier, f"{project}: depend on cmx-core through a version range"
    assert "0.1.0" in core[0].specifier
    assert any(s.operator == "<" for s in core[0].specifier), f"{project}: no upper bound"
    assert (directory / "README.md").is_file(), f"{directory}: no README.md"
    assert list((directory / "tests").glob("test_*.py")), f"{directory}: no tests"
