"""The result parts of cmx-mlebench's steps: one per graded submission (``kind: report``)
and one per seed aggregate (``kind: aggregate``), in the ``mle_bench`` section, with the
score, thresholds, medals and above-median as typed metrics with their direction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmx_core.api import Metric, ResultPart
from cmx_mlebench.report import CompetitionReport

SUITE = "mle-bench"
SECTION = "mle_bench"
THRESHOLDS = ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold")
FLAGS = ("any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "valid_submission")


def _benchmark(task: str, mode: str, source: str, primary: str) -> dict[str, Any]:
    return {"suite": SUITE, "task": task, "mode": mode, "division": "unofficial" if source != "kaggle" else None,
            "primary_metric": primary}


def report_metrics(report: CompetitionReport) -> dict[str, Metric]:
    higher = not report.is_lower_better
    metrics = {"score": Metric(report.score, "score", higher)}
    metrics.update({name: Metric(getattr(report, name), "score", higher) for name in THRESHOLDS})
    metrics.update({name: Metric(int(getattr(report, name)), "medal" if "medal" in name else "flag", True)
                    for name in FLAGS})
    return metrics


def report_part(report: CompetitionReport, mode: str, *, agent: Mapping[str, Any] | None = None) -> ResultPart:
    section = {"kind": "report", **report.to_dict(), "agent": dict(agent) if agent is not None else None}
    return ResultPart(
        status="valid" if report.valid_submission else "invalid",
        benchmark=_benchmark(report.competition_id, mode, report.leaderboard_source, "score"),
        metrics=report_metrics(report),
        invalid_reasons=() if report.reason is None else (report.reason,),
        sections={SECTION: section},
        notes="leaderboard_source: synthetic (a pool of baseline models, not Kaggle teams)"
        if report.leaderboard_source == "synthetic" else "")


def grading_report(reports: Sequence[Mapping[str, Any]], runs: int) -> dict[str, Any]:
    """MLE-bench's grading report totals over ``reports`` (``runs`` counts the attempts, reported or not)."""
    def total(key: str) -> int:
        return sum(bool(r.get(key)) for r in reports)

    return {"total_runs": runs, "total_runs_with_submissions": total("submission_exists"),
            "total_valid_submissions": total("valid_submission"), "total_medals": total("any_medal"),
            "total_gold_medals": total("gold_medal"), "total_silver_medals": total("silver_medal"),
            "total_bronze_medals": total("bronze_medal"), "total_above_median": total("above_median"),
            "competition_reports": [dict(r) for r in reports]}


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path
