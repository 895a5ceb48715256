"""Scaling stays honest (issue 43 item 7): every point of a sweep trains with the same threads
per rank and records what torch used; strong and weak scaling each have their baseline and
formula; an efficiency above 1.05 is flagged with its likely cause. The flag is judged on
recorded results built here (never timed), so no test depends on the machine's speed."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_train import threads as threads_module
from cmx_train.config import parse
from cmx_train.scaling import SUSPECT_ABOVE, Baseline, Point, baseline_from_sweep, efficiency
from cmx_train.step import run_step
from cmx_train.threads import choose

SWEEP = "sw-20260101-000000-abcdef12"


def record(world: int, sps: float, *, per_rank: int | None, batch: int, scaling: str = "strong",
           cv: float | None = 0.01, cores: int = 8) -> dict[str, Any]:
    """A stored throughput result as the step writes it (the fields the baseline search reads)."""
    threads = None if per_rank is None else {"ranks": world, "per_rank": per_rank, "total": per_rank * world,
                                             "requested_per_rank": per_rank, "chosen_by": "test", "cores": cores}
    section = {"mode": "throughput", "world_size": world, "model": {"name": "digits-cnn"}, "precision": "fp32",
               "device": "cpu", "scaling": scaling, "global_batch_size": batch, "per_rank_batch_size": batch // world,
               "step_time_cv": cv}
    if threads is not None:
        section["threads"] = threads
    return {"status": "valid", "run_id": f"run-{world}-{batch}", "train": section,
            "metrics": {"samples_per_second": {"value": sps, "unit": "samples/s"}}}


def sweep_with(tmp_path: Path, *documents: dict[str, Any], matrix: list[dict[str, str]] | None = None) -> Path:
    folder = tmp_path / SWEEP
    for index, document in enumerate(documents):
        (folder / f"point-{index}").mkdir(parents=True)
        (folder / f"point-{index}" / "result.json").write_text(json.dumps(document))
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"base_inputs": {"batch_size": "64"}, "matrix": matrix or [{"nproc": "1"}, {"nproc": "2"}]}
    (folder / "sweep.json").write_text(json.dumps(spec))
    return folder


# -- threads per rank: one choice for the whole sweep ------------------------------------------------------------

def test_every_point_of_a_sweep_gets_the_threads_of_its_widest_point(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = sweep_with(tmp_path, matrix=[{"nproc": "1"}, {"nproc": "2"}, {"nproc": "4"}])
    monkeypatch.setattr(threads_module, "cores", lambda: 8)
    chosen = {n: choose(parse({"nproc": n, "batch_size": 64}), folder / f"point-{i}", {})
              for i, n in enumerate((1, 2, 4))}
    assert {c.per_rank for c in chosen.values()} == {2}  # 8 cores / 4 ranks, also for the 1-process point
    assert chosen[1].chosen_by == f"8 cores / 4 ranks per node, the most of sweep {SWEEP}"
    outside = choose(parse({"nproc": 1}), tmp_path / "run", {})
    assert outside.per_rank == 8 and outside.chosen_by == "8 cores / 1 ranks per node"
    assert choose(parse({"nproc": 4, "batch_size": 64}), folder / "point-2", {}).per_rank == 2
    monkeypatch.setattr(threads_module, "cores", lambda: 3)
    assert choose(parse({"nproc": 1}), folder / "point-0", {}).per_rank == 1  # at least 1 (3 // 4 = 0)


def test_an_input_or_the_environment_sets_the_threads_of_every_point(tmp_path: Path) -> None:
    folder = sweep_with(tmp_path)
    assert choose(parse({"threads_per_rank": 3}), folder / "point-0", {"CMX_TRAIN_THREADS": "1"}).per_rank == 3
    given = choose(parse({}), folder / "point-0", {"CMX_TRAIN_THREADS": "5"})
    assert (given.per_rank, given.chosen_by) == (5, "CMX_TRAIN_THREADS=5")


def test_a_real_sweep_records_the_same_threads_per_rank_at_every_point(cli: Any, as_json: Any) -> None:
    """Without CMX_TRAIN_THREADS, the 1-process point used to take every core and each rank
    of the 2-process point half of them; now both take cores // 2, read back from torch."""
    proc = cli("sweep", "--tags=train,throughput", "--matrix", "nproc=1,2", "--batch-size=16", "--steps=2",
               "--warmup-steps=0", "-j", "1", "--json", CMX_TRAIN_THREADS="")
    assert proc.returncode == 0, proc.stderr
    expected = max(1, threads_module.cores() // 2)
    for point, ranks in zip(as_json(proc)["points"], (1, 2), strict=True):
        section = json.loads(Path(point["result_path"]).read_text())["train"]
        threads = section["threads"]
        assert threads["chosen_by"].endswith(f"/ 2 ranks per node, the most of sweep {as_json(proc)['sweep_id']}")
        assert (threads["ranks"], threads["per_rank"], threads["requested_per_rank"]) == (ranks, expected, expected)
        assert threads["total"] == ranks * expected and threads["omp_num_threads"] == str(expected)
        assert [r["threads"] for r in section["ranks"]] == [expected] * ranks
        assert section["scaling"] == "strong" and section["efficiency"]["scaling"] == "strong"


# -- the suspect flag, on recorded results -----------------------------------------------------------------------

def test_the_flag_fires_on_a_recorded_sweep_whose_baseline_had_fewer_threads(tmp_path: Path) -> None:
    folder = sweep_with(tmp_path, record(1, 100.0, per_rank=1, batch=64), record(2, 400.0, per_rank=2, batch=64))
    base = baseline_from_sweep(folder / "point-1", parse({"nproc": 2, "batch_size": 64}))
    assert base is not None and base.point.threads_per_rank == 1 and base.source.startswith(f"sweep {SWEEP} point-0")
    judged = efficiency("strong", Point(400.0, 2, threads_per_rank=2, total_threads=4, cores=8), base)
    assert judged.value == 2.0 and judged.suspect
    assert judged.causes == ("fewer threads at the baseline: 1 per rank at 1 process, 2 per rank here",)
    assert judged.warning() == ("scaling_efficiency 2 is above 1.05 and suspect: fewer threads at the baseline: "
                                "1 per rank at 1 process, 2 per rank here")


def test_the_issue_case_names_the_differing_threads_and_the_oversubscribed_baseline() -> None:
    """Issue 43: the 1-process point on 2 threads, each rank of the 2-process point on 1, on a
    busy 2-core machine (the baseline's step times all over the place)."""
    base = Baseline(Point(10.0, 1, threads_per_rank=2, total_threads=2, cores=1, step_time_cv=0.8), "sweep")
    judged = efficiency("strong", Point(190.2, 2, threads_per_rank=1, total_threads=2, cores=1), base)
    assert math.isclose(judged.value or 0, 9.51) and judged.suspect
    assert judged.causes == ("threads per rank differ between points: 2 at the baseline, 1 here",
                             "the baseline oversubscribed the CPUs: 2 threads on 1 cores",
                             "the baseline point was noisy: its step times vary by CV 0.80 (above 0.1); "
                             "repeat it on a quiet machine")


def test_no_flag_at_or_below_the_bound_and_a_cause_even_without_a_recorded_one() -> None:
    base = Baseline(Point(100.0, 1, threads_per_rank=2, total_threads=2, cores=8), "sweep")
    at_bound = efficiency("strong", Point(100.0 * 4 * SUSPECT_ABOVE, 4, threads_per_rank=2), base)
    assert math.isclose(at_bound.value or 0, SUSPECT_ABOVE) and not at_bound.suspect and at_bound.causes == ()
    assert at_bound.warning() is None
    above = efficiency("strong", Point(440.0, 4, threads_per_rank=2), base)
    assert above.suspect and above.causes[0].startswith("no recorded cause (a smaller batch per rank")
    unknown = efficiency("strong", Point(440.0, 4, threads_per_rank=2), Baseline(Point(100.0, 1), "sweep"))
    assert unknown.causes == ("threads per rank were not recorded at the baseline",)
    given = efficiency("strong", Point(440.0, 4, threads_per_rank=2),
                       Baseline(Point(100.0, 1), "input baseline_samples_per_s", measured=False))
    assert given.causes[0].startswith("the baseline was given (input baseline_samples_per_s), not measured")


def test_a_run_against_a_recorded_thinner_baseline_says_so_in_its_result_and_on_stderr(
        cmx_step_context: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real 1-process run (2 threads) beside a recorded 1-process point with 1 thread and a
    samples/s far below anything a run reaches: the efficiency is far above 1.05 whatever the
    machine's speed."""
    folder = sweep_with(tmp_path, record(1, 1e-6, per_rank=1, batch=16, scaling="weak"))
    context = cmx_step_context(params={"batch_size": 16, "steps": 2, "warmup_steps": 0, "scaling": "weak",
                                       "threads_per_rank": 2, "timeout_s": 120})
    (folder / "point-1").mkdir()
    part = run_step(dataclasses.replace(context, run_dir=folder / "point-1")).result
    assert part is not None
    section = part.sections["train"]
    assert section["baseline_from"].startswith(f"sweep {SWEEP} point-0") and section["baseline_threads_per_rank"] == 1
    assert section["threads"]["per_rank"] == 2 and section["efficiency"]["suspect"] is True
    assert section["efficiency"]["causes"] == ["fewer threads at the baseline: 1 per rank at 1 process, "
                                               "2 per rank here"]
    assert (part.metrics["scaling_efficiency"].value or 0) > 1e3
    assert "fewer threads at the baseline" in part.notes
    assert f"cmx-train: warning: {part.notes}" in capsys.readouterr().err


# -- strong or weak: which baseline, which formula ---------------------------------------------------------------

def test_weak_scaling_keeps_the_batch_of_each_rank_and_strong_the_global_one() -> None:
    weak, strong = parse({"scaling": "weak", "nproc": 4, "batch_size": 16}), parse({"nproc": 4, "batch_size": 16})
    assert (weak.global_batch_size, weak.per_rank_batch) == (64, 16)
    assert (strong.global_batch_size, strong.per_rank_batch) == (16, 4)
    assert parse({"scaling": "weak", "nproc": 3, "batch_size": 5}).global_batch_size == 15  # no divisibility
    with pytest.raises(UsageError, match="scaling must be one of strong, weak"):
        parse({"scaling": "sideways"})
    with pytest.raises(UsageError, match="scaling weak applies to throughput and time-to-accuracy"):
        parse({"scaling": "weak", "mode": "max-batch"})


def test_the_efficiency_formula_follows_the_scaling_kind(tmp_path: Path) -> None:
    """Step time t(1) = 0.1 s at batch 16, t(4) = 0.05 s: strong scaling (global batch 16 at
    both) is t(1) / (4 x t(4)) = 0.5, weak (16 on every rank) is t(1) / t(4) = 2 (flagged)."""
    t1, t4 = 0.1, 0.05
    folder = sweep_with(tmp_path, record(1, 16 / t1, per_rank=1, batch=16),
                        record(1, 16 / t1, per_rank=1, batch=16, scaling="weak"),
                        record(1, 64 / t1, per_rank=1, batch=64, scaling="weak"))
    for kind, expected in (("strong", t1 / (4 * t4)), ("weak", t1 / t4)):
        config = parse({"scaling": kind, "nproc": 4, "batch_size": 16})
        base = baseline_from_sweep(folder / "point-3", config)
        assert base is not None and base.source.startswith(f"sweep {SWEEP} point-{0 if kind == 'strong' else 1}")
        judged = efficiency(kind, Point(config.global_batch_size / t4, 4, threads_per_rank=1), base)
        assert judged.scaling == kind and math.isclose(judged.value or 0, expected), kind
        assert ("same global batch" if kind == "strong" else "same batch per rank") in judged.formula
    assert baseline_from_sweep(folder / "point-3", parse({"scaling": "weak", "nproc": 4, "batch_size": 8})) is None
