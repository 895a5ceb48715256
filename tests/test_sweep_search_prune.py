"""``cmx sweep --search`` (#51): a point whose live series shows it hopeless is pruned early
(Optuna's median pruner reads the series the point's run reports as it goes), and once the
budget is spent the best point and the runner-up run again so the report gives their gap in
noise units. The recipes plant their values, so nothing depends on the machine's speed."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.sweep.confirm import APART, Noise
from cmx_core.telemetry import journal as journal_module
from cmx_core.telemetry.journal import Journal

PRUNE = """
name: planted-prune
tags: [planted, prune]
summary: a score of x, reported live three times; a point with x <= 3 then holds for 30 s
inputs:
  x: {type: integer, default: 1}
cache: false
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["sh", "-c", "{LIVE}"]
      metrics:
        score: {kv: SCORE, unit: points, higher_is_better: true}
""".replace("{LIVE}", 'for i in 1 2 3; do echo \\"score {{ inputs.x }}\\" >> \\"$CMX_METRICS_FILE\\"; sleep 0.05; '
           'done; if [ {{ inputs.x }} -le 3 ]; then sleep 30; fi; echo SCORE={{ inputs.x }}')
"""A low point holds for 30 s after its live values: a search that did not prune it
would take 30 s a point more (and the test would see it measured)."""

NOISY = """
name: planted-noisy
tags: [planted, noisy]
summary: 100 x plus a jitter of -1, 0 or +1 that cycles with the runs counted in count_dir
inputs:
  x: {type: integer, default: 1}
  count_dir: {type: string, default: ""}
cache: false
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["sh", "-c", "{COUNT}"]
      metrics:
        score: {kv: SCORE, unit: points, higher_is_better: true}
""".replace("{COUNT}", "mkdir -p {{ inputs.count_dir }}; n=$(ls {{ inputs.count_dir }} | wc -l); "
            "touch {{ inputs.count_dir }}/$n; echo SCORE=$(( 100 * {{ inputs.x }} + n % 3 - 1 ))")


def _search(cli: Callable[..., Any], recipe: Path, tags: str, *extra: str) -> dict[str, Any]:
    done = cli("sweep", f"--tags={tags}", "--recipes", recipe.parent, "--matrix", "x=1..8", "-q", "--json",
               "--search", "max:score", *extra)
    assert done.code == 0, done.err
    document: dict[str, Any] = json.loads(done.out)
    return document


def test_a_point_whose_live_series_is_below_the_median_is_pruned_and_the_result_says_so(
        cli: Callable[..., Any], recipes: Any, cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_TELEMETRY_INTERVAL_S", "0.1")  # the shell step's file is read at each round
    document = _search(cli, recipes("planted-prune", PRUNE), "planted,prune", "--budget", "8", "--prune",
                       "--confirm", "0")
    search = document["search"]
    assert search["prune"] == "score" and search["measured"] == 8
    trials = search["trials"]
    pruned = [t for t in trials if t["state"] == "pruned"]
    assert pruned, trials
    assert trials[0]["state"] == "measured"  # the pruner waits for finished points to compare with
    for position, trial in enumerate(trials):
        if trial["state"] != "pruned":
            continue
        finished = [t["value"] for t in trials[:position] if t["state"] == "measured"]
        assert trial["value"] is None and trial["live"] == float(trial["point"]["x"])
        assert finished and trial["live"] < max(finished), (trial, finished)
        assert "pruned at report" in trial["message"] and "median" in trial["message"]
        folder = cmx_home / "data" / "sweeps" / document["sweep_id"]
        record = json.loads((folder / f"point-{trial['index']}.json").read_text())
        assert record["status"] == "pruned" and not (folder / f"point-{trial['index']}" / "result.json").exists()
        journal = folder / "live" / f"point-{trial['index']}.jsonl"
        live = [json.loads(line) for line in journal.read_text().splitlines()]
        assert live and all(e["name"] == "score" and e["value"] == trial["live"] for e in live)
    assert search["best"]["value"] == 8
    text = cli("results", "compare", "--sweep", document["sweep_id"])
    assert text.code == 0


def test_without_a_live_series_nothing_is_pruned_and_the_report_says_why(
        cli: Callable[..., Any], recipes: Any, tmp_path: Path) -> None:
    done = cli("sweep", "--tags=planted,noisy", "--recipes", recipes("planted-noisy", NOISY).parent,
               "--matrix", "x=1..4", "-q", "--search", "max:score", "--budget", "4", "--prune", "--confirm", "0",
               f"--count_dir={tmp_path / 'n'}")
    assert done.code == 0, done.err
    assert "no run reported a live score, so none could be pruned" in " ".join(done.out.split())


def test_the_best_and_the_runner_up_run_again_and_their_gap_is_told_in_noise_units(
        cli: Callable[..., Any], recipes: Any, cmx_home: Path, tmp_path: Path) -> None:
    document = _search(cli, recipes("planted-noisy", NOISY), "planted,noisy", "--budget", "8",
                       f"--count_dir={tmp_path / 'n'}")
    search = document["search"]
    assert search["confirm"] == 2 and search["measured"] == 8
    noise = search["noise"]
    assert len(noise["samples"]["best"]) == len(noise["samples"]["runner_up"]) == 3 and noise["lost"] == 0
    folder = cmx_home / "data" / "sweeps" / document["sweep_id"]
    for key, trial in (("best", search["best"]), ("runner_up", search["runner_up"])):
        again = [json.loads((folder / "confirm" / f"point-{trial['index']}-c{k}" / "result.json").read_text())
                 for k in (1, 2)]
        assert noise["samples"][key] == [trial["value"], *(d["metrics"]["score"]["value"] for d in again)]
        assert all(d["provenance"]["sweep"]["index"] == trial["index"] for d in again)
    best, second = noise["samples"]["best"], noise["samples"]["runner_up"]
    pooled = ((statistics.variance(best) * 2 + statistics.variance(second) * 2) / 4) ** 0.5
    assert noise["sigma"] == pytest.approx(pooled)
    assert noise["distance"] == pytest.approx((statistics.median(best) - statistics.median(second)) / pooled)
    assert noise["distance"] > APART and noise["verdict"] == "the best is ahead beyond the noise"
    assert search["best"]["point"] == {"x": "8"} and search["runner_up"]["point"] == {"x": "7"}
    assert len(list((tmp_path / "n").iterdir())) == 8 + 4  # the 8 points and 2 runs more of each of two
    text = cli("sweep", "--resume", document["sweep_id"], "-q")
    assert text.code == 0 and "noise units apart" in " ".join(text.out.split())
    assert len(list((tmp_path / "n").iterdir())) == 12  # a resumed search runs no confirmation twice


def test_the_noise_rule() -> None:
    near = Noise((100.0, 104.0, 98.0), (99.0, 103.0, 97.0), maximize=True)
    assert near.sigma == pytest.approx(statistics.stdev([100.0, 104.0, 98.0]))
    assert abs(near.distance or 0) < APART and near.verdict() == "within the noise: the two are not told apart"
    flipped = Noise((10.0, 11.0, 12.0), (20.0, 21.0, 22.0), maximize=True)
    assert flipped.verdict() == "the runner-up measured better beyond the noise when run again"
    assert Noise((1.0, 2.0, 3.0), (9.0, 10.0, 11.0), maximize=False).verdict() == "the best is ahead beyond the noise"
    assert Noise((5.0,), (4.0,), maximize=True).sigma is None
    assert Noise((5.0, 5.0), (4.0, 4.0), maximize=True).verdict() == "noise unknown: the runs did not vary"


def test_the_journal_counts_each_series_reports_and_stops_at_its_bound(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "MAX_LINES", 3)
    journal = Journal(tmp_path / "j.jsonl")
    for value in (1.0, 2.0, 3.0, 4.0, 5.0):
        journal.add("loss", "n/s", (("rank", "0"),) if value == 2.0 else (), value)
    journal.close()
    lines = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert [(e.get("value"), e.get("n")) for e in lines[:3]] == [(1.0, 1), (2.0, 1), (3.0, 2)]
    assert lines[3] == {"truncated": True} and len(lines) == 4


def test_a_point_that_wrote_its_whole_result_before_the_sigterm_counts_as_measured(tmp_path: Path) -> None:
    from cmx_core.sweep.request import Live
    from cmx_core.sweep.runner import Launch, _run_point

    run_dir = tmp_path / "point-0"
    run_dir.mkdir()
    result = run_dir / "result.json"
    script = f"echo '{{\"run_id\": \"r1\", \"status\": \"valid\"}}' > {result}; sleep 30"
    stop = Live(tmp_path / "journal.jsonl", lambda: "pruned: hopeless" if result.exists() else "")
    kept = _run_point(0, {"x": "1"}, ["sh", "-c", script], run_dir, Launch(live=stop))
    assert kept.status == "valid" and kept.exit_code == 0 and kept.run_id == "r1" and not kept.message
    (tmp_path / "second").mkdir()
    cut = _run_point(0, {"x": "1"}, ["sh", "-c", "sleep 30"], tmp_path / "second",
                     Launch(live=Live(tmp_path / "j2.jsonl", lambda: "pruned: hopeless")))
    assert cut.status == "pruned" and cut.message == "pruned: hopeless" and cut.failed
