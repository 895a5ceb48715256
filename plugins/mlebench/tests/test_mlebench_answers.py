"""Answers and reports as MLE-bench has them: ``.jsonl`` answers (a competition whose answers
are JSON lines, graded end to end through ``cmx``), floats read round-trip exact, ``created_at``
a datetime written with ``isoformat()``, and MLE-bench's own preparer run over raw data when a
package named ``mlebench`` is importable (here a small one written in the test with MLE-bench's
layout and call signature: the real package is not installed on this machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_mlebench.competition import Competition, load_competition
from cmx_mlebench.grading import grade, load_answers, read_csv
from cmx_mlebench.prepare import Prepared, prepare

COMP = "essay-grades"
GRADES = ["A", "B", "C", "B", "A", "C", "A", "B"]

GRADER = '''
def grade(submission, answers):
    """Accuracy of the submission's grades; MLE-bench hands .jsonl answers over as a list of dicts."""
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise TypeError(f"answers are {type(answers).__name__}, not a list of JSON objects")
    truth = {int(a["essay_id"]): a["grade"] for a in answers}
    if sorted(submission["essay_id"]) != sorted(truth):
        raise ValueError("the submission's essay_id values differ from the answers'")
    hits = sum(truth[int(i)] == g for i, g in zip(submission["essay_id"], submission["grade"]))
    return hits / len(truth)


def nan_score(submission, answers):
    return float("nan")


def inf_score(submission, answers):
    return float("inf")


def text_score(submission, answers):
    return "0.5"


def exact_floats(submission, answers):
    """1.0 when every float survived the CSV round trip bit for bit, else the share that did."""
    return float((submission["x"] == answers["x"]).mean())
'''


def _layout(tmp_path: Path, answers_name: str = "answers.jsonl") -> tuple[Path, Path, Path]:
    """A competitions dir, a data dir with the prepared split, and the grader's package dir."""
    package = tmp_path / "pkg" / "essaygrades"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "grade.py").write_text(GRADER)
    defs, data = tmp_path / "competitions", tmp_path / "data"
    (defs / COMP).mkdir(parents=True)
    (defs / COMP / "config.yaml").write_text(
        f"id: {COMP}\nname: Essay grades\ncompetition_type: simple\nawards_medals: false\nprizes: null\n"
        f"description: description.md\ndataset:\n  answers: {COMP}/prepared/private/{answers_name}\n"
        f"  sample_submission: {COMP}/prepared/public/sample_submission.csv\n"
        f"grader:\n  name: accuracy\n  grade_fn: essaygrades.grade:grade\npreparer: essaygrades.prepare:prepare\n")
    (defs / COMP / "description.md").write_text("Grade each essay A, B or C.\n")
    (defs / COMP / "leaderboard.csv").write_text(
        "scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore\n"
        + "".join(f"{s},{i},True,2020-01-01,{s},True\n" for i, s in enumerate([1.0, 0.875, 0.75, 0.5, 0.25])))
    public, private = data / COMP / "prepared" / "public", data / COMP / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    (private / "answers.jsonl").write_text(
        "".join(json.dumps({"essay_id": i, "grade": g}) + "\n" for i, g in enumerate(GRADES)))
    (public / "sample_submission.csv").write_text("essay_id,grade\n" + "".join(f"{i},A\n" for i in range(8)))
    return defs, data, tmp_path / "pkg"


@pytest.fixture(autouse=True)
def _forget_test_modules() -> Iterator[None]:
    """The packages written by a test are imported from its tmp_path: forget them afterwards."""
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in ("mlebench", "essaygrades")]:
        del sys.modules[name]


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    defs, data, pkg = _layout(tmp_path)
    monkeypatch.syspath_prepend(str(pkg))
    return defs, data, pkg


def test_jsonl_answers_are_graded_as_a_list_of_objects(on_path: tuple[Path, Path, Path], tmp_path: Path) -> None:
    defs, data, _ = on_path
    (tmp_path / "node").mkdir()
    found = prepare(COMP, tmp_path / "node", data_dir=data, competitions_dir=defs)
    assert found.prepared_as == "as-is" and found.competition.answers.suffix == ".jsonl"
    answers = load_answers(found.competition.answers)
    assert answers == [{"essay_id": i, "grade": g} for i, g in enumerate(GRADES)]
    submission = tmp_path / "submission.csv"
    submission.write_text("essay_id,grade\n" + "".join(f"{i},{g if i < 6 else 'C'}\n" for i, g in enumerate(GRADES)))
    report = grade(found.competition, submission, checksums=found.checksums)
    # 6 of 8 right (essay 6 is A, essay 7 is B; both answered C): 0.75, the leaderboard's third score
    assert report.score == 0.75 and report.valid_submission and not report.is_lower_better
    # 5 teams: bronze at position max(1, int(2.0)) = 2, i.e. 0.875; the median is 0.75 and above-median is strict
    assert (report.bronze_threshold, report.median_threshold) == (0.875, 0.75)
    assert not report.any_medal and not report.above_median
    sample = grade(found.competition, found.competition.sample_submission, checksums=found.checksums)
    assert sample.score == 0.375                                 # three essays are A


def test_jsonl_competition_through_cmx(tmp_path: Path) -> None:
    defs, data, pkg = _layout(tmp_path)
    submission = tmp_path / "submission.csv"
    submission.write_text("essay_id,grade\n" + "".join(f"{i},{g}\n" for i, g in enumerate(GRADES)))
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=mle-bench,grade",
                           f"--competition={COMP}", f"--submission={submission}", f"--data-dir={data}",
                           f"--competitions-dir={defs}", "--json"], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    section = json.loads(proc.stdout)["mle_bench"]
    assert section["score"] == 1.0 and section["gold_medal"] and section["competition_id"] == COMP
    assert datetime.fromisoformat(section["created_at"]).tzinfo is None     # MLE-bench's datetime.now().isoformat()


def test_a_malformed_jsonl_line_is_one_line_naming_it(on_path: tuple[Path, Path, Path]) -> None:
    _, data, _ = on_path
    path = data / COMP / "prepared" / "private" / "answers.jsonl"
    path.write_text('{"essay_id": 0, "grade": "A"}\n{"essay_id": 1,\n')
    with pytest.raises(UsageError, match=r"answers\.jsonl:2: not a JSON line") as info:
        load_answers(path)
    assert "\n" not in str(info.value)


def test_answers_of_another_kind_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "answers.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(UsageError, match=r"answers\.parquet: answers must be a \.csv or \.jsonl file"):
        load_answers(path)


def test_floats_are_read_round_trip_exact(on_path: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Values pandas' default parser reads one ulp off (found by comparing with float()) come through exact."""
    import pandas as pd

    defs, data, _ = on_path
    values = ["0.13436424411240122", "0.43276706790505337", "2.2322111021323866e-05", "0.0007258526014465152"]
    text = "x\n" + "\n".join(values) + "\n"
    (tmp_path / "x.csv").write_text(text)
    import io
    assert (pd.read_csv(io.StringIO(text))["x"] != [float(v) for v in values]).all()   # the default is off
    assert list(read_csv(tmp_path / "x.csv")["x"]) == [float(v) for v in values]
    private = data / COMP / "prepared" / "private"
    (private / "floats.csv").write_text(text)
    config = defs / COMP / "config.yaml"
    config.write_text(config.read_text().replace("answers.jsonl", "floats.csv").replace(":grade\n", ":exact_floats\n"))
    competition = load_competition(defs / COMP, data)
    report = grade(competition, tmp_path / "x.csv", checksums=None)
    assert report.score == 1.0          # every value equal bit for bit: submission and answers both round-trip


def test_created_at_is_a_datetime_written_as_mlebench_writes_it(on_path: tuple[Path, Path, Path]) -> None:
    defs, data, _ = on_path
    competition = load_competition(defs / COMP, data)
    before = datetime.now()
    report = grade(competition, competition.sample_submission, checksums=None)
    assert isinstance(report.created_at, datetime) and before <= report.created_at <= datetime.now()
    assert report.to_dict()["created_at"] == report.created_at.isoformat()


PREPARER = '''
import json
from pathlib import Path


def prepare(raw: Path, public: Path, private: Path) -> None:
    """MLE-bench's preparer signature: split raw/essays.jsonl, the last three lines for the test set."""
    rows = [json.loads(line) for line in (raw / "essays.jsonl").read_text().splitlines() if line.strip()]
    train, test = rows[:-3], rows[-3:]
    (public / "train.csv").write_text("essay_id,grade\\n" + "".join(f"{r['essay_id']},{r['grade']}\\n" for r in train))
    (public / "sample_submission.csv").write_text("essay_id,grade\\n" + "".join(f"{r['essay_id']},A\\n" for r in test))
    (private / "answers.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in test))
'''


def _with_raw(defs: Path, data: Path, pkg: Path) -> None:
    """Turn the layout into raw data plus an ``mlebench`` package whose preparer splits it."""
    import shutil

    shutil.rmtree(data / COMP / "prepared")
    raw = data / COMP / "raw"
    raw.mkdir(parents=True)
    (raw / "essays.jsonl").write_text("".join(json.dumps({"essay_id": i, "grade": g}) + "\n"
                                              for i, g in enumerate(GRADES)))
    module = pkg / "mlebench" / "competitions" / "essay_grades"
    module.mkdir(parents=True)
    for folder in (pkg / "mlebench", pkg / "mlebench" / "competitions", module):
        (folder / "__init__.py").write_text("")
    (module / "prepare.py").write_text(PREPARER)
    config = defs / COMP / "config.yaml"
    config.write_text(config.read_text().replace("essaygrades.prepare:prepare",
                                                 "mlebench.competitions.essay_grades.prepare:prepare"))


def test_mlebench_preparer_prepares_raw_data(on_path: tuple[Path, Path, Path], tmp_path: Path) -> None:
    defs, data, pkg = on_path
    _with_raw(defs, data, pkg)
    node = tmp_path / "node"
    node.mkdir()
    found: Prepared = prepare(COMP, node, data_dir=data, competitions_dir=defs)
    assert found.prepared_as == "mlebench-preparer" and found.outputs()["prepared_as"] == "mlebench-preparer"
    assert found.competition.answers == node / "data" / COMP / "prepared" / "private" / "answers.jsonl"
    assert not (data / COMP / "prepared").exists()          # the raw data is read in place, the split is cached
    assert [a["essay_id"] for a in load_answers(found.competition.answers)] == [5, 6, 7]
    report = grade(found.competition, found.competition.sample_submission, checksums=found.checksums)
    assert report.score == pytest.approx(1 / 3, abs=1e-5)     # essay 5 is C, 6 is A, 7 is B: one A right


def test_raw_data_without_mlebench_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    defs, data, pkg = _layout(tmp_path)
    _with_raw(defs, data, pkg)
    import shutil

    shutil.rmtree(pkg / "mlebench")                           # no package named mlebench anywhere on the path
    monkeypatch.syspath_prepend(str(pkg))
    (tmp_path / "node").mkdir()
    with pytest.raises(UsageError, match="the mlebench package is not importable") as info:
        prepare(COMP, tmp_path / "node", data_dir=data, competitions_dir=defs)
    assert "raw" in str(info.value) and "\n" not in str(info.value)




def reference_read_jsonl(path: Path) -> list[object]:
    """REFERENCE, transcribed from MLE-bench (mlebench/utils.py ``read_jsonl``, as ``load_answers`` calls it)."""
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize(("text", "line"), [
    ('{"essay_id": 0, "grade": "A"}\n\n{"essay_id": 1, "grade": "B"}\n', 2),     # a blank line inside
    ('{"essay_id": 0, "grade": "A"}\n\n', 2),                                      # a blank line at the end
    ('{"essay_id": 0, "grade": "A"}\n   \n', 2),                                   # only spaces
    ('\n{"essay_id": 0, "grade": "A"}', 1),
])
def test_a_blank_jsonl_line_fails_as_the_real_grader_does(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError):
        reference_read_jsonl(path)
    with pytest.raises(UsageError, match=rf"answers\.jsonl:{line}: a blank line") as info:
        load_answers(path)
    assert "\n" not in str(info.value)


def test_a_last_jsonl_line_without_its_newline_is_read_as_the_real_grader_does(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text('{"essay_id": 0, "grade": "A"}\n{"essay_id": 1, "grade": NaN}')
    read = load_answers(path)
    assert json.dumps(read) == json.dumps(reference_read_jsonl(path))
    assert read[0] == {"essay_id": 0, "grade": "A"}


def _grading_with(defs: Path, data: Path, function: str) -> Competition:
    config = defs / COMP / "config.yaml"
    config.write_text(config.read_text().replace(":grade\n", f":{function}\n"))
    return load_competition(defs / COMP, data)


def test_a_nan_score_is_valid_with_no_medal_as_in_mlebench(on_path: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """MLE-bench: ``round(nan, 5)`` is a score (not None), so the submission is valid; every medal
    comparison with NaN is false. The grading report is written with NaN, as ``json.dump`` writes it."""
    import math

    from cmx_mlebench.result import grading_report, write_json

    defs, data, _ = on_path
    competition = _grading_with(defs, data, "nan_score")
    report = grade(competition, competition.sample_submission, checksums=None)
    assert report.score is not None and math.isnan(report.score) and report.valid_submission
    assert not report.any_medal and not report.above_median and report.reason is None
    written = write_json(tmp_path / "grading_report.json", grading_report([report.to_dict()], 1))
    assert '"score": NaN' in written.read_text()


def test_an_infinite_score_is_kept_and_ranked_as_in_mlebench(on_path: tuple[Path, Path, Path]) -> None:
    defs, data, _ = on_path
    competition = _grading_with(defs, data, "inf_score")
    report = grade(competition, competition.sample_submission, checksums=None)
    assert report.score == float("inf") and report.valid_submission and report.gold_medal   # higher is better


def test_a_score_that_is_not_a_number_is_invalid_where_mlebench_stops(on_path: tuple[Path, Path, Path]) -> None:
    """MLE-bench's ``round("0.5", 5)`` raises a TypeError out of ``grade_csv``; cmx reports the
    submission invalid with the reason (listed in docs/mlebench.md as more lenient)."""
    defs, data, _ = on_path
    competition = _grading_with(defs, data, "text_score")
    with pytest.raises(TypeError):
        round("0.5", 5)  # type: ignore[call-overload]
    report = grade(competition, competition.sample_submission, checksums=None)
    assert report.score is None and not report.valid_submission and "not a number" in str(report.reason)


def test_a_submission_over_the_size_limit_is_not_read(on_path: tuple[Path, Path, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Stricter than MLE-bench (which reads any size): over ``MAX_SUBMISSION_BYTES`` is not read."""
    from cmx_mlebench import grading

    defs, data, _ = on_path
    competition = load_competition(defs / COMP, data)
    size = competition.sample_submission.stat().st_size
    monkeypatch.setattr(grading, "MAX_SUBMISSION_BYTES", size - 1)
    report = grade(competition, competition.sample_submission, checksums=None)
    assert report.submission_exists and report.score is None and f"is {size} bytes, over" in str(report.reason)
    monkeypatch.setattr(grading, "MAX_SUBMISSION_BYTES", size)
    assert grade(competition, competition.sample_submission, checksums=None).score == 0.375
