"""docs/faults.md against the code: its tables list every fault class, injection and
recovery option; and the smaller claims it makes (the doubled backoff, a chaos entry without
points hits every point, a sweep point without a result counts as incomplete)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.cli.recovery_opts import chaos_options
from cmx_core.faults.registry import INJECTORS
from cmx_core.plugins.loader import get_registry
from cmx_core.providers.recovery import FAULT_CLASSES, RetryPolicy
from cmx_core.results.faults import fault_report
from cmx_core.sweep import runner
from cmx_core.sweep.batch import parse_point_options
from cmx_core.sweep.state import SweepSpec

DOC = Path(__file__).resolve().parent.parent / "docs" / "faults.md"
TEXT = DOC.read_text(encoding="utf-8")


def _first_column(after: str) -> list[str]:
    section = TEXT.split(after, 1)[1]
    table = section[section.index("\n|"):].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([a-z_-]+)` \|", table, re.MULTILINE)]


def test_the_fault_class_table_lists_every_class() -> None:
    assert sorted(_first_column("### Fault classes")) == sorted(FAULT_CLASSES)


def test_the_injection_table_lists_every_fault() -> None:
    assert _first_column("## Fault injection") == list(INJECTORS.kinds)
    assert set(INJECTORS.kinds) - set(INJECTORS.step_kinds) == {"kill-worker"}


def test_kill_worker_is_injected_by_the_executors_the_page_names() -> None:
    executors = get_registry().executors
    assert {name for name, e in executors.items() if "kill-worker" in e.injects} == {"slurm", "ray", "k8s"}
    assert "on Slurm the job's node is set down" in TEXT and "on Kubernetes the Job's pod is evicted" in TEXT
    assert "on Ray the raylet of the worker node that runs the task is killed with SIGKILL" in TEXT
    assert "The\nlocal executor (and `docker`) has no worker to kill" in TEXT


def test_every_option_named_exists(cli: Callable[..., Any]) -> None:
    run_help, sweep_help = cli("run", "--help").out, cli("sweep", "--help").out
    for option in ("--retries", "--retry-on", "--retry-backoff", "--inject"):
        assert f"`{option}" in TEXT and option in run_help and option in sweep_help
    assert "`--chaos FILE`" in TEXT and "--chaos" in sweep_help and "--chaos" not in run_help


def test_the_backoff_doubles() -> None:
    policy = RetryPolicy(3, 5.0)
    assert [policy.wait_s(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]


def test_a_chaos_entry_without_points_hits_every_point(tmp_path: Path) -> None:
    chaos = tmp_path / "c.yaml"
    chaos.write_text("chaos:\n  - inject: kill-step@1s\n")
    assert chaos_options(str(chaos), 3) == {i: ["--inject=kill-step@1s"] for i in range(3)}


def test_a_point_without_a_result_counts_as_incomplete() -> None:
    faulted = {"status": "completed", "faults": [{"class": "killed", "injected": "kill-step@0s", "detect_s": 0.1,
                                                  "recover_s": 0.2, "work_lost_s": 0.3, "recovered": True}],
               "provenance": {}}
    report = fault_report([faulted], expected=2)
    assert report is not None and (report.runs, report.completed, report.completeness) == (2, 1, 0.5)
    assert fault_report([{"status": "completed", "provenance": {}}]) is None


def test_a_sweep_with_retries_runs_as_a_batch_only_where_the_batch_resubmits(tmp_path: Path) -> None:
    assert parse_point_options(["--no-cache"]) is not None  # the batch path knows this one
    options = parse_point_options(["--no-cache", "--retries=2", "--retry-on=node_lost", "--retry-backoff=1"])
    assert options is not None and options.recovery().retries == RetryPolicy(2, 1.0, ("node_lost",))
    assert parse_point_options(["--no-cache", "--inject=kill-step@1s"]) is None  # one process per point
    executors = get_registry().executors
    assert {name for name, e in executors.items() if e.batch_retries} == {"slurm"}
    for executor, batched in (("slurm", True), ("ray", False), ("k8s", False)):
        spec = SweepSpec("sw-1", "demo,sort", {}, ({"n": "1"},), ("--retries=1",), 1, executor)
        assert (runner._batch(spec, tmp_path, (0,), None, None) is not None) is batched
        plain = SweepSpec("sw-1", "demo,sort", {}, ({"n": "1"},), (), 1, executor)
        assert runner._batch(plain, tmp_path, (0,), None, None) is not None
