"""cmx results compare compares only the comparable: runs of another recipe or suite than the
baseline are refused (exit 2, one line naming the difference) unless --force, which keeps
each difference as a "not comparable" warning; another hardware class is compared, flagged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core import paths
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import ResultStore, write_result
from cmx_core.results.comparability import differences
from cmx_core.results.examples import example_document

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"


def _doc(tmp_path: Path, run_id: str, recipe: str = "demo-sort", suite: str = "custom",
         facts: str | None = None) -> dict[str, Any]:
    part = ResultPart(status="completed", benchmark={"suite": suite, "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(10.0, "items/s", True)})
    changes: dict[str, Any] = {"run_id": run_id, "part": part, "recipe_name": recipe}
    if facts:
        changes["facts"] = json.loads((FACTS / f"{facts}.json").read_text())["facts"]
    return example_document(tmp_path / run_id, **changes)


def _store(tmp_path: Path, *documents: dict[str, Any]) -> None:
    store = ResultStore(paths.results_db())
    for doc in documents:
        store.index(doc, write_result(tmp_path / doc["run_id"], doc, suites=None))


def test_another_recipe_is_refused_in_one_line_unless_forced(cli: Callable[..., Any], tmp_path: Path) -> None:
    _store(tmp_path, _doc(tmp_path, "llama1", recipe="mlperf-inference-llama"), _doc(tmp_path, "sort1"))
    refused = cli("results", "compare", "llama1", "sort1")
    assert refused.code == 2 and len(refused.err_lines) == 1 and "Traceback" not in refused.err
    line = refused.err_lines[0]
    assert "run sort1 is recipe 'demo-sort', the baseline llama1 recipe 'mlperf-inference-llama'" in line
    assert "not comparable" in line and "--force" in line and refused.out == ""
    as_json = cli("results", "compare", "llama1", "sort1", "--json")
    assert as_json.code == 2 and json.loads(as_json.out)["exit_code"] == 2
    forced = cli("results", "compare", "llama1", "sort1", "--force", "--json")
    assert forced.code == 0, forced.err
    [warning] = json.loads(forced.out)["warnings"]
    assert warning.startswith("not comparable: run sort1 is recipe 'demo-sort'")
    assert "warning: not comparable: run sort1" in forced.err
    table = cli("results", "compare", "llama1", "sort1", "--force")
    assert table.code == 0 and "not comparable" in table.err


def test_another_suite_is_named_first(cli: Callable[..., Any], tmp_path: Path) -> None:
    _store(tmp_path, _doc(tmp_path, "a", suite="mlperf-inference"), _doc(tmp_path, "b", recipe="other"))
    refused = cli("results", "compare", "a", "b")
    assert refused.code == 2 and "run b is suite 'custom', the baseline a suite 'mlperf-inference'" in refused.err
    assert "(and 1 more difference)" in refused.err and "runs of different suites" in refused.err


def test_a_repeat_of_another_recipe_is_caught_too(tmp_path: Path) -> None:
    same, other = _doc(tmp_path, "s1"), _doc(tmp_path, "o1", recipe="other")
    assert differences([[same], [_doc(tmp_path, "s2")]]) == []
    [found] = differences([[same], [_doc(tmp_path, "s3"), other]])
    assert (found.what, found.run_id, found.value, found.baseline_value) == ("recipe", "o1", "other", "demo-sort")


def test_another_hardware_class_is_compared_and_flagged(cli: Callable[..., Any], tmp_path: Path) -> None:
    _store(tmp_path, _doc(tmp_path, "h", facts="h100-sxm-8x"), _doc(tmp_path, "l", facts="l4-1x"))
    apart = cli("results", "compare", "h", "l", "--json")
    assert apart.code == 0 and json.loads(apart.out)["warnings"] == []   # its own series: nothing compared
    done = cli("results", "compare", "h", "l", "--across=hardware", "--json")
    assert done.code == 0, done.err
    [warning] = json.loads(done.out)["warnings"]
    assert "hardware class" in warning and "accelerator h100 -> l4" in warning
