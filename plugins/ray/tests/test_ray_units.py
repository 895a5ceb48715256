"""Pure parts of cmx-ray: resources from a plan, the cluster check, the far task's file
bundle (its bound and its path check), run directly without Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cmx_ray import far, runs
from cmx_ray.resources import TaskResources, missing, ray_accelerator_type


@pytest.mark.parametrize(("tag", "ray_name"), [("h100", "H100"), ("h100-sxm", "H100"), ("a100", "A100"),
                                               ("l4", "L4"), ("mi300x", "AMD-Instinct-MI300X-OAM")])
def test_accelerator_names_follow_rays_convention(tag: str, ray_name: str) -> None:
    assert ray_accelerator_type(tag) == ray_name


def test_missing_names_each_gap() -> None:
    needs = TaskResources(1.0, 2.0, "H100", "h100").needs()
    assert needs == {"CPU": 1.0, "GPU": 2.0, "accelerator_type:H100": 0.001}
    assert missing(needs, {"CPU": 4.0, "GPU": 2.0, "accelerator_type:H100": 1.0}) == []
    assert missing(needs, {"CPU": 4.0, "GPU": 1.0}) == ["2 GPU (the cluster has 1)",
                                                       "accelerator type H100 (no node has it)"]


def test_the_far_task_runs_the_command_and_returns_its_output(tmp_path: Path) -> None:
    script = "import os,pathlib; p=pathlib.Path('remote'); p.mkdir(); (p/'a.txt').write_text(open('lock.json').read())"
    result = far.run_far([sys.executable, "-c", script], {}, b'{"x": 1}', 1000)
    assert result.exit_code == 0 and result.files == {"a.txt": b'{"x": 1}'} and not result.error
    too_big = far.run_far([sys.executable, "-c", script], {}, b"x" * 2000, 1000)
    assert too_big.files == {} and "more than max_result_mb=0.001" in too_big.error


def test_returned_files_cannot_leave_the_run_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside the run directory"):
        far.write_files({"../evil": b"x"}, tmp_path / "out")
    far.write_files({"a/b.json": b"{}"}, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b.json").read_bytes() == b"{}"


def test_a_run_is_cut_off_only_once_its_node_has_been_dead_for_the_grace() -> None:
    """The latest run's node declared dead for GRACE_S without a later run: cut off; a node
    dead for less, an earlier run's node, or no run at all: not."""
    seen = runs.TaskRuns({0: 10.0, 1: 50.0}, nodes={0: "a", 1: "b"})
    assert runs.cut_off(seen, {"b": 100.0}, 100.0 + runs.GRACE_S) == (1, "b")
    assert runs.cut_off(seen, {"b": 100.0}, 100.0 + runs.GRACE_S - 1) is None
    assert runs.cut_off(seen, {"a": 0.0}, 1000.0) is None  # Ray already ran the task again elsewhere
    assert runs.cut_off(runs.TaskRuns(), {"a": 0.0}, 1000.0) is None


def test_run_numbers_are_told_by_their_place_and_a_later_submission_outranks_ray_retries() -> None:
    seen = runs.TaskRuns({0: 1.0, 1: 2.0, runs.PER_SUBMISSION: 3.0})
    assert [seen.ordinal(n) for n in (0, 1, runs.PER_SUBMISSION)] == [1, 2, 3]
    assert "came from run 2 of the Ray task, given up when run 3 started" in runs.refusal(seen, 1)
    assert runs.refusal(seen, runs.PER_SUBMISSION) == ""
