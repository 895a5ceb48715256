"""``mlebench.seeds``: N seeds (over one competition or a split) as N (x competitions) runs
and one aggregate.

One ``cmx run`` records one result, so this step runs every (competition, seed) pair as its
own ``cmx run`` of the per-seed recipe ``mle-bench-attempt`` through cmx-core's sweep
runner (each in its own process and run directory, indexed in the results store, with
``provenance.sweep``), reads back each result's ``mle_bench`` report, and returns the
aggregate as this run's own result: its members are the pairs' run ids. A pair whose run
wrote no result counts as a failure for its seed (MLE-bench pads missing seeds the same way).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmx_core.api import (
    Artifact,
    Metric,
    ResultPart,
    StepContext,
    StepOutput,
    SweepRequest,
    UsageError,
    data_dir,
    point_command,
    run_sweep,
)
from cmx_mlebench.agent import check_sandbox
from cmx_mlebench.aggregate import MeanSem, SeedTally, mean_sem, tally
from cmx_mlebench.competition import check_id
from cmx_mlebench.result import SECTION, SUITE, grading_report, write_json
from cmx_mlebench.splits import SPLITS, split_competitions
from cmx_mlebench.steps import agent_settings

ATTEMPT_TAGS = "mle-bench,attempt"
PASSED = ("agent_cmd", "time_limit_s", "memory_gb", "cpus", "processes", "keep_mb", "sandbox", "agent_env", "agent_dir",
          "shm_size", "gpus", "data_dir", "competitions_dir")
"""Inputs handed to every per-seed run (empty ones are left out)."""


def _competitions(params: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    split = str(params.get("split") or "")
    if split:
        if split not in SPLITS:
            raise UsageError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
        data = str(params.get("data_dir") or "")
        defs = str(params.get("competitions_dir") or "")
        return split_competitions(split, Path(data) if data else None, Path(defs) if defs else None), split
    return (check_id(str(params.get("competition") or "")),), None


def _seeds(params: Mapping[str, Any]) -> int:
    try:
        seeds = int(params.get("seeds", 3))
    except (TypeError, ValueError):
        raise UsageError(f"--seeds={params.get('seeds')!r}: expected a whole number from 1 to 100") from None
    if not 1 <= seeds <= 100:
        raise UsageError(f"--seeds={seeds}: expected a whole number from 1 to 100")
    return seeds


def _read(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def run_members(ctx: StepContext, competitions: Sequence[str], seeds: int) -> list[dict[str, Any]]:
    """Run every pair; for each, its point, run id, status and report (``None`` without one)."""
    base = {k: str(ctx.params[k]) for k in PASSED if ctx.params.get(k) not in (None, "")}
    matrix = [{"competition": c, "seed": str(s)} for c in competitions for s in range(seeds)]
    jobs = max(1, int(ctx.params.get("jobs") or 1))

    def progress(point: Any, total: int) -> None:
        ctx.log.info("mle-bench: %s seed %s: %s (%d of %d)", point.point["competition"], point.point["seed"],
                     point.status, point.index + 1, total)

    # cmx-core's point command reads ``run --tags=...`` without the ``recipe`` noun; argparse then
    # takes an input value with a space (``--agent_cmd=python x.py``) for the noun. Name the noun
    # where this cmx-core leaves it out.
    options = [] if "recipe" in point_command("x", {}, {}, []) else ["recipe"]
    sweep = run_sweep(SweepRequest(ATTEMPT_TAGS, base, matrix, data_dir=data_dir(), run_options=options,
                                   jobs=jobs), on_point=progress)
    members = []
    for point in sweep.points:
        document = _read(point.result_path)
        section = document.get(SECTION) if document else None
        members.append({"competition": point.point["competition"], "seed": int(point.point["seed"]),
                        "run_id": point.run_id, "status": point.status, "message": point.message,
                        "report": section if isinstance(section, dict) and section.get("kind") == "report" else None})
    ctx.log.info("mle-bench: sweep %s, manifest %s", sweep.sweep_id, sweep.manifest)
    return members


def tallies(members: Sequence[Mapping[str, Any]], competitions: Sequence[str], seeds: int) -> list[SeedTally]:
    out = []
    for seed in range(seeds):
        reports = {m["competition"]: m["report"] for m in members if m["seed"] == seed and m["report"] is not None}
        out.append(tally(seed, competitions, reports))
    return out


def _stat(per_seed: Sequence[SeedTally], attr: str) -> MeanSem:
    return mean_sem([t.pct(getattr(t, attr)) for t in per_seed])


def aggregate_part(members: Sequence[Mapping[str, Any]], competitions: Sequence[str], seeds: int,
                   split: str | None) -> ResultPart:
    per_seed = tallies(members, competitions, seeds)
    medal = _stat(per_seed, "any_medal")
    sources = {str(m["report"].get("leaderboard_source")) for m in members if m["report"]}
    source = sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")
    missing = [f"{m['competition']} seed {m['seed']}: {m['message'] or m['status']}"
               for m in members if m["report"] is None]
    section = {
        "kind": "aggregate", "split": split, "competitions": list(competitions), "seeds": seeds,
        "members": [m["run_id"] for m in members if m["run_id"]], "metric": "any_medal_percentage",
        "mean": medal.mean, "sem": medal.sem, "n": medal.n, "sem_reason": medal.sem_reason,
        "leaderboard_source": source, "missing": missing,
        "per_seed": [{"seed": t.seed, "any_medal_percentage": t.pct(t.any_medal), "gold_percentage": t.pct(t.gold),
                      "above_median_percentage": t.pct(t.above_median),
                      "valid_submission_percentage": t.pct(t.valid), "missing": list(t.missing)} for t in per_seed],
        "runs": [{k: m[k] for k in ("competition", "seed", "run_id", "status")} for m in members],
    }
    metrics = {"any_medal_pct": Metric(medal.mean, "%", True), "any_medal_pct_sem": Metric(medal.sem, "%", False)}
    for name, attr in (("gold_pct", "gold"), ("above_median_pct", "above_median"), ("valid_submission_pct", "valid")):
        metrics[name] = Metric(_stat(per_seed, attr).mean, "%", True)
    task = split or competitions[0]
    return ResultPart(
        status="partial" if missing else "valid",
        benchmark={"suite": SUITE, "task": task, "mode": "aggregate",
                   "division": None if source == "kaggle" else "unofficial", "primary_metric": "any_medal_pct"},
        metrics=metrics, invalid_reasons=tuple(missing), sections={SECTION: section},
        notes=f"any-medal % over {seeds} seed(s), mean ± SEM; leaderboard_source: {source}")


def seeds_step(ctx: StepContext) -> StepOutput:
    competitions, split = _competitions(ctx.params)
    seeds = _seeds(ctx.params)

    check_sandbox(agent_settings(ctx.params))  # bad agent settings or a sandbox that cannot start stop here,
    # once, not in every per-seed run
    members = run_members(ctx, competitions, seeds)
    part = aggregate_part(members, competitions, seeds, split)
    reports = [m["report"] for m in members if m["report"] is not None]
    path = write_json(Path(ctx.work_dir) / "grading_report.json", grading_report(reports, len(members)))
    section = part.sections[SECTION]
    return StepOutput(outputs={"any_medal_pct": section["mean"], "any_medal_pct_sem": section["sem"],
                               "members": section["members"], "report": str(path)},
                      result=part, artifacts=(Artifact(path, "grading_report"),))
