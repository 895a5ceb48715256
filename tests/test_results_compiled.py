"""The result validator is reproducible: nothing generated is checked in; it is compiled on
first use with the pinned generator, cached by (schema digest, generator version, Python),
and a warm process validates without importing jsonschema, fastjsonschema or decimal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import ResultsError
from cmx_core.results import compiled
from cmx_core.results.examples import example_document
from cmx_core.results.validate import validate_document

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with an empty in-process memo (and, via conftest, an empty cache: not
    the validators directory the suite's runs share)."""
    monkeypatch.setattr(compiled, "_MEMO", {})
    monkeypatch.delenv(compiled.DIR_ENV, raising=False)


def _cached_files() -> list[Path]:
    from cmx_core import paths

    return sorted((paths.cache_dir() / compiled.CACHE_SUBDIR).glob("*.bin"))


def test_no_generated_validator_is_checked_in() -> None:
    tracked = subprocess.run(["git", "ls-files", "cmx_core/results"], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    for name in tracked:
        text = (ROOT / name).read_text(encoding="utf-8") if (ROOT / name).is_file() else ""
        assert "fastjsonschema" not in text.split("\n", 3)[0], f"{name} looks generated"
    assert "cmx_core/results/_validator.py" not in tracked


def test_the_generator_is_pinned_exactly_and_installed_at_that_version() -> None:
    import fastjsonschema

    assert fastjsonschema.VERSION == compiled.GENERATOR_VERSION
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dependencies = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert f'"fastjsonschema=={compiled.GENERATOR_VERSION}"' in dependencies, (
        "pyproject.toml must list fastjsonschema==GENERATOR_VERSION as a runtime dependency")


def test_first_use_compiles_and_caches_then_the_cache_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    check = compiled.validator(SCHEMA)
    assert check({"a": "x"}) == {"a": "x"}
    with pytest.raises(compiled.SchemaViolation, match=r"^data\.a must be string$"):
        check({"a": 1})
    assert len(_cached_files()) == 1
    monkeypatch.setattr(compiled, "_MEMO", {})
    monkeypatch.setattr(compiled, "generate", _refuse)
    again = compiled.validator(SCHEMA)  # loaded from the cache: the generator is not called
    with pytest.raises(compiled.SchemaViolation, match=r"^data must contain \['a'\] properties$"):
        again({})


def _refuse(schema: Any) -> Any:
    raise AssertionError("the generator ran although the validator was cached")


def test_the_cache_key_changes_with_the_schema_the_generator_and_python(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = compiled.schema_digest(SCHEMA)
    assert digest == compiled.schema_digest(json.loads(json.dumps(SCHEMA, sort_keys=True)))
    key = compiled.cache_key(digest)
    assert compiled.cache_key(compiled.schema_digest({**SCHEMA, "required": []})) != key
    monkeypatch.setattr(compiled, "GENERATOR_VERSION", "9.9.9")
    assert compiled.cache_key(digest) != key
    monkeypatch.undo()
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-399")
    assert compiled.cache_key(digest) != key


def test_a_damaged_cache_entry_is_compiled_again() -> None:
    compiled.validator(SCHEMA)
    [entry] = _cached_files()
    entry.write_bytes(b"validate\n\x00garbage")
    compiled._MEMO.clear()
    with pytest.raises(compiled.SchemaViolation):
        compiled.validator(SCHEMA)({"a": 2})


def test_without_fastjsonschema_jsonschema_validates_with_the_same_paths(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "fastjsonschema", None)  # import fails
    from cmx_core.results import validate

    monkeypatch.setattr(validate, "_ENVELOPE", [])
    document = example_document(tmp_path)
    validate_document(document)
    document["timing"]["wall_s"] = -1
    with pytest.raises(ResultsError, match=r"^r\.json: invalid result document: \$\.timing\.wall_s "):
        validate_document(document, source="r.json")
    assert _cached_files() == []  # the fallback is not cached


def test_an_unwritable_cache_only_costs_the_compile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("CMX_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(compiled.SchemaViolation):
        compiled.validator(SCHEMA)({})


WARM = """
import json, sys, time
from pathlib import Path
from cmx_core.plugins.loader import load_registry
from cmx_core.results.examples import example_document, mlperf_part
from cmx_core.results.validate import validate_document
suites = load_registry().suites
doc = example_document(Path(sys.argv[1]), part=mlperf_part())
start = time.perf_counter()
validate_document(doc, suites=suites)
print(json.dumps({"s": time.perf_counter() - start,
                  "modules": sorted(m for m in ("jsonschema", "fastjsonschema", "decimal") if m in sys.modules)}))
"""


def test_a_warm_process_validates_without_the_heavy_imports(tmp_path: Path, cmx_home: Path) -> None:
    env = {**os.environ, "CMX_HOME": str(cmx_home), "CMX_LOAD_PLUGINS": "mlperf"}

    def run() -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", WARM, str(tmp_path)], env=env, capture_output=True,
                              text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return result

    cold = run()
    assert "fastjsonschema" in cold["modules"]  # compiled (and the mlperf schema checked) once
    warm = run()
    assert warm["modules"] == [], warm  # its time is a figure for benchmarks/, not a test: it moves with the load


def test_a_validators_directory_of_its_own_is_shared_and_the_cache_holds_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.DIR_ENV, str(tmp_path / "shared"))
    compiled.validator(SCHEMA)
    assert [p.suffix for p in (tmp_path / "shared").iterdir()] == [".bin"] and _cached_files() == []
    compiled._MEMO.clear()
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "another-home"))  # a second home loads it
    monkeypatch.setattr(compiled, "generate", lambda schema: pytest.fail("compiled again"))
    with pytest.raises(compiled.SchemaViolation, match=r"^data\.a must be string$"):
        compiled.validator(SCHEMA)({"a": 1})
