"""Grading submissions of the three offline competitions: the graders' checks on malformed
and short submissions, invalid or missing submissions keeping their thresholds and reason,
symbolic links refused, a tampered split refused, and the medals of real submissions
checked against thresholds computed here, by hand, from the leaderboard.csv the build wrote."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cmx_core.errors import ResultsError
from cmx_mlebench.grading import grade
from cmx_mlebench.offline.graders import InvalidSubmission, accuracy, auc, rmse
from cmx_mlebench.prepare import Prepared, still_valid

ANSWERS = pd.DataFrame({"id": [3, 1, 2], "target": [1.0, 0.0, 1.0]})


@pytest.mark.parametrize(("submission", "message"), [
    (pd.DataFrame({"id": [1, 2, 3]}), "columns must be id,target"),
    (pd.DataFrame({"target": [1, 0, 1], "id": [1, 2, 3]}), "columns must be id,target"),
    (pd.DataFrame({"id": [1, 2], "target": [0, 1]}), "2 rows, expected 3"),
    (pd.DataFrame({"id": [1, 1, 3], "target": [0, 1, 1]}), "duplicate ids"),
    (pd.DataFrame({"id": [1, 2, 4], "target": [0, 1, 1]}), "ids differ"),
    (pd.DataFrame({"id": [1, 2, 3], "target": ["a", 1, 1]}), "finite number"),
])
def test_graders_refuse_malformed_and_short_submissions(submission: pd.DataFrame, message: str) -> None:
    with pytest.raises(InvalidSubmission, match=message):
        accuracy(submission, ANSWERS)


def test_graders_align_rows_by_id() -> None:
    shuffled = pd.DataFrame({"id": [1, 2, 3], "target": [0.0, 1.0, 1.0]})
    assert accuracy(shuffled, ANSWERS) == 1.0
    assert rmse(pd.DataFrame({"id": [1, 2, 3], "target": [1.0, 1.0, 1.0]}), ANSWERS) == pytest.approx((1 / 3) ** 0.5)
    assert auc(pd.DataFrame({"id": [1, 2, 3], "target": [0.1, 0.9, 0.8]}), ANSWERS) == 1.0
    with pytest.raises(InvalidSubmission, match=r"\[0, 1\]"):
        auc(pd.DataFrame({"id": [1, 2, 3], "target": [0.1, 1.5, 0.8]}), ANSWERS)


def _hand_thresholds(path: Path) -> tuple[float, float, float, float, bool]:
    """The table of workloads.md §2.2 for fewer than 100 teams, computed independently."""
    scores = [float(row["score"]) for row in csv.DictReader(path.read_text().splitlines())]
    n = len(scores)
    assert n < 100
    at = lambda share: scores[max(1, int(share * n)) - 1]  # noqa: E731
    ordered = sorted(scores)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    return at(0.1), at(0.2), at(0.4), median, scores[0] < scores[-1]


def _medal(score: float, gold: float, silver: float, bronze: float, lower: bool) -> str:
    better = (lambda a, b: a <= b) if lower else (lambda a, b: a >= b)
    return "gold" if better(score, gold) else "silver" if better(score, silver) else \
        "bronze" if better(score, bronze) else "none"


@pytest.mark.parametrize("name", ["sklearn-digits", "sklearn-diabetes", "sklearn-breast-cancer"])
def test_real_submissions_get_the_medals_of_hand_computed_thresholds(built: dict[str, Prepared], name: str,
                                                                   tmp_path: Path) -> None:
    prepared = built[name]
    comp = prepared.competition
    gold, silver, bronze, median, lower = _hand_thresholds(comp.leaderboard)
    assert lower is (name == "sklearn-diabetes")
    sample = grade(comp, comp.sample_submission, checksums=prepared.checksums)
    shutil.copyfile(comp.answers, tmp_path / "perfect.csv")  # the answers themselves: the best score
    perfect = grade(comp, tmp_path / "perfect.csv", checksums=prepared.checksums)
    for report in (sample, perfect):
        assert report.valid_submission and report.score is not None
        assert (report.gold_threshold, report.silver_threshold, report.bronze_threshold) == (gold, silver, bronze)
        assert report.median_threshold == pytest.approx(median) and report.is_lower_better is lower
        won = "gold" if report.gold_medal else "silver" if report.silver_medal else \
            "bronze" if report.bronze_medal else "none"
        assert won == _medal(report.score, gold, silver, bronze, lower)
        assert report.above_median is ((report.score < median) if lower else (report.score > median))
        assert report.leaderboard_source == "synthetic" and report.score == round(report.score, 5)
    assert perfect.gold_medal and perfect.score == (0.0 if lower else 1.0)
    assert not sample.any_medal  # a constant prediction is the worst of the pool or worse


def test_a_missing_submission_keeps_its_thresholds_and_reason(built: dict[str, Prepared], tmp_path: Path) -> None:
    prepared = built["sklearn-digits"]
    report = grade(prepared.competition, tmp_path / "none.csv", checksums=prepared.checksums,
                   why_missing="the agent ended with time_limit")
    assert not report.submission_exists and not report.valid_submission and report.score is None
    assert not report.any_medal and not report.above_median and report.gold_threshold > 0
    assert "no submission" in str(report.reason) and "time_limit" in str(report.reason)


@pytest.mark.parametrize(("content", "reason"), [
    ("id,label\n1,2\n", "columns must be id,target"),
    ("id,target\n1,2\n", "rows, expected"),
    ("\x00\x01garbage", "invalid submission"),
    ("", "not a readable CSV"),
])
def test_an_invalid_submission_gives_its_reason(built: dict[str, Prepared], tmp_path: Path, content: str,
                                                reason: str) -> None:
    prepared = built["sklearn-digits"]
    path = tmp_path / "submission.csv"
    path.write_text(content)
    report = grade(prepared.competition, path, checksums=prepared.checksums)
    assert report.submission_exists and not report.valid_submission and report.score is None
    assert reason in str(report.reason) and report.bronze_threshold > 0


def test_a_submission_that_is_a_link_to_the_answers_is_not_read(built: dict[str, Prepared], tmp_path: Path) -> None:
    prepared = built["sklearn-digits"]
    link = tmp_path / "submission.csv"
    os.symlink(prepared.competition.answers, link)
    report = grade(prepared.competition, link, checksums=prepared.checksums)
    assert report.score is None and "symbolic link" in str(report.reason)


def test_a_tampered_split_is_refused_and_not_served_from_the_cache(built: dict[str, Prepared]) -> None:
    prepared = built["sklearn-breast-cancer"]
    answers = prepared.competition.answers
    original = answers.read_bytes()
    assert still_valid(prepared.outputs())
    try:
        answers.write_bytes(original.replace(b",1\n", b",0\n", 1))
        with pytest.raises(ResultsError, match="does not match its checksum") as caught:
            grade(prepared.competition, prepared.competition.sample_submission, checksums=prepared.checksums)
        assert "private/test.csv" in str(caught.value) and "\n" not in str(caught.value)
        assert not still_valid(prepared.outputs())
    finally:
        answers.write_bytes(original)
    assert still_valid(prepared.outputs())


def test_the_build_writes_mle_benchs_layout(built: dict[str, Prepared]) -> None:
    for name, prepared in built.items():
        comp = prepared.competition
        assert {p.name for p in comp.definition_dir.iterdir()} >= {"config.yaml", "description.md", "leaderboard.csv"}
        assert {p.name for p in comp.public_dir.iterdir()} == {"train.csv", "test.csv", "sample_submission.csv",
                                                               "description.md"}
        assert [p.name for p in comp.private_dir.iterdir()] == ["test.csv"]
        assert comp.config.leaderboard_source == "synthetic" and comp.id == name
        test_ids = set(pd.read_csv(comp.public_dir / "test.csv")["id"])
        train_ids = set(pd.read_csv(comp.public_dir / "train.csv")["id"])
        assert test_ids == set(pd.read_csv(comp.answers)["id"]) and not test_ids & train_ids
        assert "target" not in pd.read_csv(comp.public_dir / "test.csv").columns


def _mlebench_layout(prepared: Prepared, tmp_path: Path) -> tuple[Path, Path]:
    """An MLE-bench data dir (<id>/prepared/...) and competitions dir (<id>/config.yaml...) copied from a build."""
    comp = prepared.competition
    data, defs = tmp_path / "data", tmp_path / "competitions"
    shutil.copytree(comp.data_root / comp.id / "prepared", data / comp.id / "prepared")
    shutil.copytree(comp.definition_dir, defs / comp.id)
    return data, defs


def test_a_prepared_data_dir_is_used_as_is(built: dict[str, Prepared], tmp_path: Path) -> None:
    from cmx_mlebench.prepare import prepare

    data, defs = _mlebench_layout(built["sklearn-diabetes"], tmp_path)
    node = tmp_path / "node"
    node.mkdir()
    found = prepare("sklearn-diabetes", node, data_dir=data, competitions_dir=defs)
    assert found.prepared_as == "as-is"
    assert found.competition.answers == data / "sklearn-diabetes/prepared/private/test.csv"
    assert not (node / "data").exists() and still_valid(found.outputs())
    report = grade(found.competition, found.competition.sample_submission, checksums=found.checksums)
    assert report.valid_submission and report.is_lower_better


def test_a_definitions_md5_checksums_are_checked(built: dict[str, Prepared], tmp_path: Path) -> None:
    import hashlib

    from cmx_mlebench.prepare import prepare

    data, defs = _mlebench_layout(built["sklearn-digits"], tmp_path)
    answers = data / "sklearn-digits/prepared/private/test.csv"
    good = hashlib.md5(answers.read_bytes()).hexdigest()
    (defs / "sklearn-digits/checksums.yaml").write_text(f"public: {{}}\nprivate: {{test.csv: {good}}}\n")
    (tmp_path / "n1").mkdir()
    assert prepare("sklearn-digits", tmp_path / "n1", data_dir=data, competitions_dir=defs).prepared_as == "as-is"
    (defs / "sklearn-digits/checksums.yaml").write_text("public: {}\nprivate: {test.csv: 0123}\n")
    (tmp_path / "n2").mkdir()
    with pytest.raises(ResultsError, match="does not match its md5"):
        prepare("sklearn-digits", tmp_path / "n2", data_dir=data, competitions_dir=defs)
