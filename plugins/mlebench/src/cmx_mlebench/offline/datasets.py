"""The raw data of each offline competition, from scikit-learn's bundled datasets, and the
split MLE-bench's preparers make: a fixed share held out as the test set (stratified for
classification), ``random_state`` 0."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_mlebench.offline.graders import ID, TARGET

TEST_SHARE = 0.2
SPLIT_SEED = 0


@dataclass(frozen=True)
class Task:
    loader: str  # a sklearn.datasets function name
    kind: str  # classification | regression
    metric: str  # accuracy | rmse | auc
    placeholder: float  # the sample submission's target value


TASKS = {
    "sklearn-digits": Task("load_digits", "classification", "accuracy", 0.0),
    "sklearn-diabetes": Task("load_diabetes", "regression", "rmse", 150.0),
    "sklearn-breast-cancer": Task("load_breast_cancer", "classification", "auc", 0.5),
}


def raw_frame(competition: str) -> Any:
    """The whole dataset as a DataFrame: ``id``, the features ``f0..``, ``target``."""
    import pandas as pd  # deferred: pandas only when this runs (493 modules)
    import sklearn.datasets  # deferred: sklearn only when this runs (1493 modules)

    bunch = getattr(sklearn.datasets, TASKS[competition].loader)()
    frame = pd.DataFrame(bunch.data, columns=[f"f{i}" for i in range(bunch.data.shape[1])])
    frame.insert(0, ID, range(len(frame)))
    frame[TARGET] = bunch.target
    return frame


def write_raw(competition: str, raw: Path) -> Path:
    raw.mkdir(parents=True, exist_ok=True)
    path = raw / "train.csv"
    raw_frame(competition).to_csv(path, index=False)
    return path


def prepare(raw: Path, public: Path, private: Path, competition: str) -> None:
    """MLE-bench's ``prepare(raw, public, private)``: public train, unlabeled test and sample
    submission; the test answers private."""
    import pandas as pd  # deferred: pandas only when this runs (493 modules)
    from sklearn.model_selection import train_test_split  # deferred: sklearn only when this runs (1467 modules)

    task = TASKS[competition]
    frame = pd.read_csv(raw / "train.csv")
    stratify = frame[TARGET] if task.kind == "classification" else None
    train, test = train_test_split(frame, test_size=TEST_SHARE, random_state=SPLIT_SEED, stratify=stratify)
    train, test = train.sort_values(ID), test.sort_values(ID)
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    sample = pd.DataFrame({ID: test[ID], TARGET: task.placeholder})
    sample.to_csv(public / "sample_submission.csv", index=False)
    test[[ID, TARGET]].to_csv(private / "test.csv", index=False)


def prepare_digits(raw: Path, public: Path, private: Path) -> None:
    prepare(raw, public, private, "sklearn-digits")


def prepare_diabetes(raw: Path, public: Path, private: Path) -> None:
    prepare(raw, public, private, "sklearn-diabetes")


def prepare_breast_cancer(raw: Path, public: Path, private: Path) -> None:
    prepare(raw, public, private, "sklearn-breast-cancer")
