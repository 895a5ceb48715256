"""Honest facts: a run on this machine with another machine's --facts is refused (exit 2,
one line, nothing stored), a plan with them works, and a run that used a facts file names
it with its sha256 in the provenance and is marked by ``cmx results list``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.facts.store import FactStore
from cmx_core.run import engine
from cmx_core.run.facts_check import CPU_COUNTS, MEMORY_TOLERANCE, check_facts_here, contradictions

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"


def _store(facts: dict[str, Any]) -> FactStore:
    return FactStore({}, facts, source="f.json")


def test_a_local_run_with_another_machines_facts_is_refused(cli: Callable[..., Any]) -> None:
    done = cli("run", "recipe", "--tags=demo,sort", "--size=5", "--repeats=1", "--facts", FACTS / "h100-sxm-8x.json")
    assert done.code == 2 and len(done.err_lines) == 1 and "Traceback" not in done.err, done.err
    line = done.err_lines[0]
    assert "describes another machine" in line and "GPUs 8x NVIDIA H100 80GB HBM3, here" in line
    assert "executor 'local' runs on this one" in line and "--facts is for planning (cmx plan)" in line
    assert "remote executors" in line and not line.startswith("cmx: error: cmx:")
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []  # nothing half-written
    as_json = cli("run", "--tags=demo,sort", "--facts", FACTS / "l4-1x.json", "--json")
    assert as_json.code == 2 and json.loads(as_json.out)["exit_code"] == 2


def test_a_plan_with_them_works(cli: Callable[..., Any]) -> None:
    done = cli("plan", "--tags=demo,sort", "--facts", FACTS / "h100-sxm-8x.json", "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["nodes"]


def test_this_machines_own_facts_are_accepted_and_named_in_the_provenance(cli: Callable[..., Any],
                                                                           tmp_path: Path) -> None:
    facts = tmp_path / "here.json"
    facts.write_text(json.dumps({"facts": engine.detect_facts()}, default=str))
    done = cli("run", "--tags=demo,sort", "--size=5", "--repeats=1", "--facts", facts, "--json")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    expected = {"path": str(facts.resolve()), "sha256": hashlib.sha256(facts.read_bytes()).hexdigest()}
    assert document["provenance"]["facts_file"] == expected
    plain = cli("run", "--tags=demo,sort", "--size=6", "--repeats=1", "--json")
    assert "facts_file" not in json.loads(plain.out)["provenance"]
    listed = {r["run_id"]: r for r in json.loads(cli("results", "list", "--json").out)["runs"]}
    assert listed[document["run_id"]]["facts_file"] == expected
    assert listed[json.loads(plain.out)["run_id"]]["facts_file"] is None
    table = cli("results", "list", "--wide").out.splitlines()  # one line a run: a status cell may wrap at 80
    marked = [line for line in table if line.startswith(document["run_id"][:12])]
    unmarked = [line for line in table if line.startswith(json.loads(plain.out)["run_id"][:12])]
    assert "(--facts)" in marked[0] and "(--facts)" not in unmarked[0]


def test_what_counts_as_a_contradiction() -> None:
    here = _store({"cpu": {"model": "Test CPU"}, "gpus": {"devices": []}})
    assert contradictions({"os": {"name": "linux"}}, here) == []  # says nothing about the hardware
    assert contradictions({"cpu": {"model": "Test CPU"}, "gpus": {"devices": []}}, here) == []
    assert contradictions({"cpu": {"model": "Other CPU"}}, here) == ["CPU 'Other CPU', here 'Test CPU'"]
    two = {"gpus": {"devices": [{"name": "NVIDIA L4"}, {"name": "NVIDIA L4"}]}}
    assert contradictions(two, here) == ["GPUs 2x NVIDIA L4, here none"]
    assert contradictions({"accelerator": ["l4"]}, here) == ["accelerator l4, here none"]
    assert contradictions({"cpu": {}}, here) == []  # no model named: nothing to contradict


def test_only_executors_that_run_here_refuse() -> None:
    other = _store({"cpu": {"model": "Other CPU"}})
    here = _store({"cpu": {"model": "Test CPU"}})
    check_facts_here(other, here, "slurm", runs_here=False)  # the facts describe the cluster's nodes
    check_facts_here(FactStore({}), here, "local", runs_here=True)  # detected, not from a file
    try:
        check_facts_here(other, here, "docker", runs_here=True)
    except UsageError as exc:
        assert "executor 'docker' runs on this one" in str(exc) and "--facts f.json" in str(exc)
    else:
        raise AssertionError("a docker run with another machine's facts was not refused")


def test_the_executors_say_where_they_run() -> None:
    from cmx_core.plugins.loader import get_registry

    executors = get_registry().executors
    assert executors["local"].runs_here and executors["docker"].runs_here
    assert not any(executors[name].runs_here for name in ("slurm", "ray", "k8s") if name in executors)


def _edited(tmp_path: Path, fact: str, key: str, value: Any) -> tuple[Path, Any]:
    """This machine's own facts with one hardware field changed, saved as a facts file; the
    field's detected value."""
    facts = engine.detect_facts()
    detected = facts[fact][key]
    facts[fact] = {**facts[fact], key: value(detected)}
    path = tmp_path / f"edited-{fact}-{key}.json"
    path.write_text(json.dumps({"facts": facts}, default=str))
    return path, detected


def _refused_in_one_line(cli: Callable[..., Any], facts: Path, out_dir: Path) -> str:
    done = cli("run", "--tags=demo,sort", "--size=5", "--repeats=1", "--facts", facts, "--output", out_dir)
    assert done.code == 2 and len(done.err_lines) == 1 and "Traceback" not in done.err, done.err
    assert not out_dir.exists() and json.loads(cli("results", "list", "--json").out)["runs"] == []
    line: str = done.err_lines[0]
    assert f"--facts {facts}" in line and "executor 'local' runs on this one" in line
    return line


def test_a_facts_file_that_edits_only_the_core_count_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    facts, cores = _edited(tmp_path, "cpu", "cores", lambda n: 112 if n != 112 else 56)
    assert isinstance(cores, int)
    line = _refused_in_one_line(cli, facts, tmp_path / "out")
    claimed = json.loads(facts.read_text())["facts"]["cpu"]["cores"]
    assert f"(cpu.cores {claimed}, here {cores})" in line


def test_a_facts_file_that_edits_only_the_memory_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    facts, total = _edited(tmp_path, "memory", "total_bytes", lambda n: n * 2)
    line = _refused_in_one_line(cli, facts, tmp_path / "out")
    assert f"(memory.total_bytes {total * 2} (" in line and f"here {total} (" in line and "(tolerance 1%)" in line


def test_every_hardware_field_is_checked() -> None:
    gib = 1 << 30
    here = _store({"cpu": {"model": "Test CPU", "sockets": 1, "cores": 2, "threads": 4},
                   "memory": {"total_bytes": 16 * gib, "available_bytes": 9 * gib},
                   "gpus": {"devices": [{"name": "NVIDIA L4", "index": 0, "memory_total_bytes": 24 * gib}]}})
    same = {"cpu": {"model": "Test CPU", "sockets": 1, "cores": 2, "threads": 4},
            "memory": {"total_bytes": 16 * gib + (5 << 20), "available_bytes": 2 * gib},  # a few MB off: fine
            "gpus": {"devices": [{"name": "NVIDIA L4", "index": 0, "memory_total_bytes": 24 * gib}]}}
    assert contradictions(same, here) == []
    assert contradictions({"cpu": {"threads": 8}}, here) == ["cpu.threads 8, here 4"]
    assert contradictions({"cpu": {"sockets": 2, "cores": 2}}, here) == ["cpu.sockets 2, here 1"]
    assert contradictions({"cpu": {"cores": None}, "memory": {}}, here) == []  # nothing stated
    assert contradictions({"memory": {"total_bytes": 17 * gib}}, here) == [
        f"memory.total_bytes {17 * gib} (17.0 GiB), here {16 * gib} (16.0 GiB) (tolerance 1%)"]
    bigger = {"gpus": {"devices": [{"name": "NVIDIA L4", "index": 0, "memory_total_bytes": 48 * gib}]}}
    assert contradictions(bigger, here) == [
        f"gpus.devices[0].memory_total_bytes {48 * gib} (48.0 GiB), here {24 * gib} (24.0 GiB) (tolerance 1%)"]
    unknown = _store({"cpu": {"model": "Test CPU", "cores": None}, "memory": {"total_bytes": None}})
    assert contradictions({"cpu": {"cores": 112}, "memory": {"total_bytes": 2 << 40}}, unknown) == []


def test_a_remote_executor_keeps_accepting_another_machines_counts() -> None:
    other = _store({"cpu": {"cores": 112, "threads": 224}, "memory": {"total_bytes": 2 << 40}})
    here = _store({"cpu": {"cores": 2, "threads": 2}, "memory": {"total_bytes": 1 << 34}})
    check_facts_here(other, here, "slurm", runs_here=False)
    try:
        check_facts_here(other, here, "local", runs_here=True)
    except UsageError as exc:
        assert "cpu.cores 112, here 2; cpu.threads 224, here 2; memory.total_bytes" in str(exc)
    else:
        raise AssertionError("a local run with another machine's core count was not refused")


def test_the_docs_name_every_checked_field_and_the_tolerance() -> None:
    root = Path(__file__).resolve().parent.parent
    recipes = (root / "docs" / "recipes.md").read_text()
    for field in (*(f"cpu.{key}" for key in CPU_COUNTS), "cpu.model", "memory.total_bytes", "memory_total_bytes",
                  "node_gpus", "MEMORY_TOLERANCE", "cmx_core/run/facts_check.py"):
        assert f"`{field}`" in recipes, field
    assert f"may be {MEMORY_TOLERANCE:.0%}".replace("%", " %") in recipes
    assert "(within 1 %)" in (root / "README.md").read_text() and MEMORY_TOLERANCE == 0.01
