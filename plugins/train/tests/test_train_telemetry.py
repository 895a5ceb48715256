"""Training's live series (docs/telemetry.md, issue #46 item 6): each rank reports its loss,
step time, samples per second and samples so far on the step's application channel, so a
training run's ``telemetry.om`` has one series per rank, with exact final counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx_core.testing.telemetry import AppSeries, read_series
from cmx_train.progress import REPORT_EVERY_S, RankProgress


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_rank_reports_at_most_every_half_second_and_once_at_the_end(tmp_path: Path) -> None:
    assert REPORT_EVERY_S == 0.5  # what docs/telemetry.md states
    file, clock = tmp_path / "app_metrics.txt", _Clock()
    progress = RankProgress(str(file), 3, clock)
    losses = iter([2.5, 2.25, 2.0])
    for _ in range(3):  # three steps of 8 samples within one interval: nothing written yet
        clock.now += 0.1
        progress.step(8, 0.1, lambda: next(losses))
    assert not file.exists()
    clock.now += REPORT_EVERY_S
    progress.step(8, 0.2, lambda: 1.5)  # 32 samples in 0.8 s: reported
    clock.now += 0.4
    progress.step(8, 0.3, lambda: 1.25)
    progress.close()  # the 8 samples since the last report, in 0.4 s
    series = AppSeries()
    series.watch(file, "train/step0")
    values = {(v.name, v.labels): v for v in series.snapshot()}
    assert series.problems == []
    assert set(values) == {(name, (("rank", "3"),)) for name in
                           ("train_samples", "train_samples_per_second", "train_step_time_seconds", "train_loss")}
    assert values[("train_samples", (("rank", "3"),))].value == 40 and \
        values[("train_samples", (("rank", "3"),))].kind == "counter"
    assert values[("train_loss", (("rank", "3"),))].value == 1.25  # the last step's, read when reported
    assert values[("train_step_time_seconds", (("rank", "3"),))].value == 0.3
    lines = file.read_text().splitlines()
    rates = [line for line in lines if line.startswith("train_samples_per_second")]
    assert len(lines) == 8
    assert rates == ['train_samples_per_second{rank="3"} 40', 'train_samples_per_second{rank="3"} 20']


def test_without_a_metrics_file_nothing_is_written(tmp_path: Path) -> None:
    progress = RankProgress(None, 0)
    progress.step(8, 0.1, lambda: 1 / 0)  # the loss is never read
    progress.close()
    assert list(tmp_path.iterdir()) == []


def test_a_two_rank_training_run_has_each_ranks_series(cli: Any, as_json: Any, home: Path) -> None:
    steps, warmup, batch = 30, 2, 16
    proc = cli("run", "--tags=train,throughput", "--nproc=2", f"--batch-size={batch}", f"--steps={steps}",
               f"--warmup-steps={warmup}", "--telemetry-interval", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    [run_dir] = [p.parent for p in home.rglob(f"*{as_json(proc)['run_id'][:8]}*/telemetry.om")]
    series = read_series(run_dir / "telemetry.om")
    by_rank: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for (name, labels), values in series.items():
        if name.startswith("cmx_app_train_"):
            given = dict(labels)
            assert set(given) == {"run", "node", "step", "rank"}, labels
            by_rank[(name, given["rank"])] = values
    names = ("cmx_app_train_loss", "cmx_app_train_step_time_seconds", "cmx_app_train_samples_per_second",
             "cmx_app_train_samples_total")
    assert set(by_rank) == {(name, rank) for name in names for rank in ("0", "1")}
    for rank in ("0", "1"):  # every sample of every step, warm-up included: the last round reads it all
        assert by_rank[("cmx_app_train_samples_total", rank)][-1][1] == (steps + warmup) * batch // 2
        assert all(v > 0 for _, v in by_rank[("cmx_app_train_step_time_seconds", rank)])
    document = json.loads((run_dir / "result.json").read_text())
    assert document["telemetry"]["unavailable"] == [] or \
        not any("metrics file" in line for line in document["telemetry"]["unavailable"])
