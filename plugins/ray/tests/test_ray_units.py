"""Pure parts of cmx-ray: resources from a plan, the cluster check, the far task's file
bundle (its bound and its path check), run directly without Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cmx_ray import far
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
