"""``requires:`` semantics (cmx_core.resolve.requirements): equality, version prefixes, packaging
version ranges, numeric bounds, list indexes in fact paths, and malformed comparisons; then
through ``cmx plan --facts`` against the saved facts of the H100, L4 and A100-MIG fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.cli.main import main
from cmx_core.errors import UsageError
from cmx_core.plugins.loader import reset_registry
from cmx_core.resolve.requirements import MISSING, as_version, lookup, satisfied

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"


@pytest.mark.parametrize(("have", "wanted", "ok"), [
    ("linux", "Linux", True), ("linux", "darwin", False),
    (["h100", "h100-sxm", "8xh100"], "h100", True), (["h100"], ["a100", "h100"], True), ([], "h100", False),
    ("12.4.1", "12.4", True), ("12.4.131", "12.4", True), ("12.40", "12.4", False), ("12.4.1", "12.4.1", True),
    ("12.4.1", ">=12.4", True), ("12.2.140", ">=12.4", False), ("12.4.1", ">=12.4,<13", True),
    ("13.0", ">=12.4,<13", False), ("12.6", "~=12.4", True), ("550.54.15", ">=535", True),
    ("v1.2.3", ">=1.2", True), ("unknown", ">=1", False), (None, ">=1", False), (None, "linux", False),
    (85520809984, ">=80e9", True), (25769803776, ">=80e9", False), (85520809984, ">=40e9,<90e9", True),
    (8, 8, True), (8, "8", True), (8.0, "==8", True), (8, "!=8", False), (True, True, True),
])
def test_semantics(have: object, wanted: object, ok: bool) -> None:
    assert satisfied(have, wanted, "r.yaml: requires.k") is ok


@pytest.mark.parametrize("bad", [">=banana", ">=", "<>3", ">=12.4,foo"])
def test_malformed_comparison_is_a_usage_error_whatever_the_fact(bad: str) -> None:
    for have in ("12.4", 3, None):
        with pytest.raises(UsageError, match=r"^r.yaml: requires.k: '.*' is neither a version range"):
            satisfied(have, bad, "r.yaml: requires.k")


def test_lookup_indexes_lists() -> None:
    root = {"devices": [{"memory_total_bytes": 1}, {"mig": [{"uuid": "MIG-x"}]}]}
    assert lookup(root, ["devices[0]", "memory_total_bytes"]) == 1
    assert lookup(root, ["devices[1]", "mig[0]", "uuid"]) == "MIG-x"
    assert lookup(root, ["devices[2]", "memory_total_bytes"]) is MISSING
    assert lookup(root, ["devices", "memory_total_bytes"]) is MISSING
    assert as_version("11.8.20220929") is not None and as_version("N/A") is None


def _plan(tmp_path: Path, facts: str, requires: str) -> int:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "g.yaml").write_text(f"name: g\ntags: [g]\nsummary: g\nrequires: {requires}\n")
    reset_registry()
    return main(["plan", "--tags=g", "--recipes", str(recipes), "--facts", str(FACTS / f"{facts}.json")])


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))


RANGE = "{cuda.selected.version: '>=12.4'}"
MEMORY = "{'gpus.devices[0].memory_total_bytes': '>=80e9'}"


@pytest.mark.parametrize(("facts", "requires", "code"), [
    ("h100-sxm-8x", RANGE, 0), ("h100-sxm-8x", MEMORY, 0), ("h100-sxm-8x", "{cuda.selected.version: '12.4'}", 0),
    ("l4-1x", RANGE, 2), ("l4-1x", MEMORY, 2), ("l4-1x", "{'gpus.devices[0].memory_total_bytes': '>=20e9'}", 0),
    ("a100-80gb-mig", MEMORY, 0), ("a100-80gb-mig", "{cuda.selected.version: '>=12.0,<12.3'}", 0),
    ("a100-80gb-mig", RANGE, 2),
])
def test_against_saved_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str], facts: str, requires: str,
                             code: int) -> None:
    assert _plan(tmp_path, facts, requires) == code
    err = capsys.readouterr().err
    if code == 2:
        assert "requires" in err and "this machine has:" in err and "Traceback" not in err


def test_malformed_range_in_a_recipe_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _plan(tmp_path, "h100-sxm-8x", "{cuda.selected.version: '>=twelve'}") == 2
    err = capsys.readouterr().err
    assert "requires.cuda.selected.version: '>=twelve' is neither a version range" in err
    assert err.count("\n") == 1


def _doc_rows() -> list[tuple[str, str, str]]:
    text = (Path(__file__).resolve().parent.parent / "docs" / "recipes.md").read_text(encoding="utf-8")
    section = text.split("## Requires\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:4] for line in section.splitlines() if line.startswith("| `")]
    return [(a.strip().strip("`"), b.strip().strip("`"), c.strip()) for a, b, c in rows]


def test_the_docs_table_is_what_the_code_does() -> None:
    import json

    import yaml

    rows = _doc_rows()
    assert len(rows) >= 10
    for have, wanted, holds in rows:
        assert satisfied(json.loads(have), yaml.safe_load(wanted), "doc") is (holds == "yes"), (have, wanted)
