"""Grading one submission as MLE-bench does: the submission exists when it is a ``.csv``
file; it is read with ``float_precision="round_trip"`` (as MLE-bench's ``read_csv``), the
answers too when they are a ``.csv``, and a ``.jsonl`` answers file is handed to the grader
as a list of its lines' JSON objects (MLE-bench's ``load_answers``); its score is the
grader's value rounded to 5 decimals (NaN and infinities included: MLE-bench keeps them, and a
NaN earns no medal); any exception of the grader (an invalid submission or anything else)
leaves it without a score, and the reason is kept. docs/mlebench.md lists every case where
cmx is stricter or more lenient than ``mlebench.grade``.

Beyond MLE-bench, a submission that is a symbolic link or larger than ``MAX_SUBMISSION_BYTES``
is not read (an agent could point ``submission.csv`` at the answers), and the private
answers are checked against the split's checksums before they are used.
"""

from __future__ import annotations

import json
import numbers
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_mlebench.checksums import verify
from cmx_mlebench.competition import Competition
from cmx_mlebench.leaderboard import read_leaderboard
from cmx_mlebench.report import CompetitionReport, ReportOrigin, Submission, build_report
from cmx_mlebench.thresholds import thresholds

MAX_SUBMISSION_BYTES = 256 << 20


@dataclass(frozen=True)
class Scored:
    score: float | None
    exists: bool
    reason: str | None


def read_csv(path: Path) -> Any:
    """``pandas.read_csv`` as MLE-bench calls it: floats parsed round-trip exact."""
    import pandas as pd  # deferred: pandas only when this runs (477 modules)

    return pd.read_csv(path, float_precision="round_trip")


def read_jsonl(path: Path) -> list[Any]:
    """One JSON value per line, as MLE-bench's ``read_jsonl`` (``json.loads`` of every line of
    the file) reads the answers: a blank line, which makes the real grader fail, or a malformed
    line is a one-line UsageError naming the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the answers ({exc.strerror})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()     # the newline that ends the last line
    values = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise UsageError(f"{path}:{number}: a blank line; MLE-bench's grader reads every line as JSON and fails "
                             "on it, so remove it")
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a JSON line ({exc.msg}); the answers need one JSON object "
                             "a line") from None
    return values


def load_answers(path: Path) -> Any:
    """The answers as MLE-bench's ``load_answers`` gives them: a DataFrame for ``.csv``, a list
    of JSON objects for ``.jsonl``; any other kind is a one-line UsageError naming the file."""
    if path.suffix == ".csv":
        try:
            return read_csv(path)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: the answers are not a readable CSV ({_one_line(exc)})") from None
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    raise UsageError(f"{path}: answers must be a .csv or .jsonl file (the competition's dataset.answers)")


def _submission_problem(path: Path) -> tuple[bool, str | None]:
    """(exists, why it cannot be read) for the submission file."""
    try:
        info = os.lstat(path)
    except OSError:
        return False, f"no submission at {path}"
    if stat.S_ISLNK(info.st_mode):
        return True, f"{path} is a symbolic link; only a regular file is graded"
    if not stat.S_ISREG(info.st_mode):
        return False, f"{path} is not a regular file"
    if path.suffix.lower() != ".csv":
        return False, f"{path} is not a .csv file"
    if info.st_size > MAX_SUBMISSION_BYTES:
        return True, f"{path} is {info.st_size} bytes, over the {MAX_SUBMISSION_BYTES} bytes graded"
    return True, None


def score_submission(competition: Competition, path: Path) -> Scored:
    """The rounded score, or ``None`` with the reason."""
    exists, problem = _submission_problem(path)
    if problem is not None:
        return Scored(None, exists, problem)
    try:
        submission = read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is an invalid submission
        return Scored(None, True, f"submission is not a readable CSV: {_one_line(exc)}")
    answers = load_answers(competition.answers)
    grade = competition.grade_fn()
    try:
        value: object = grade(submission, answers)
    except Exception as exc:  # noqa: BLE001 - MLE-bench: any grader exception means no score
        return Scored(None, True, f"invalid submission: {_one_line(exc)}")
    if not isinstance(value, numbers.Real):
        return Scored(None, True, f"invalid submission: the grader returned {type(value).__name__} {value!r}, "
                                  "not a number")
    return Scored(round(float(value), 5), True, None)     # NaN and infinities too, as MLE-bench keeps them


def grade(competition: Competition, path: Path, *, checksums: Path | None, leaderboard_source: str | None = None,
          seed: int | None = None, why_missing: str | None = None) -> CompetitionReport:
    """The report of ``path``; ``why_missing`` replaces the reason of a missing submission
    (e.g. the agent's verdict)."""
    if checksums is not None:
        verify(competition.data_root / competition.id / "prepared", checksums)
    limits = thresholds(read_leaderboard(competition.leaderboard))
    scored = score_submission(competition, path)
    reason = scored.reason
    if not scored.exists and why_missing:
        reason = f"{reason}: {why_missing}"
    submission = Submission(str(path), scored.exists, scored.score, reason)
    origin = ReportOrigin(datetime.now(), leaderboard_source or competition.config.leaderboard_source, seed)
    return build_report(competition.id, submission, limits, origin)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
