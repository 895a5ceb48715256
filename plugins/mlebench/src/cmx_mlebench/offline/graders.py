"""The graders of the offline competitions: ``grade(submission, answers) -> float`` over
pandas DataFrames, as MLE-bench's graders are called. A submission with other columns,
another length, other ids or non-numeric predictions raises :class:`InvalidSubmission`."""

from __future__ import annotations

from typing import Any

ID = "id"
TARGET = "target"


class InvalidSubmission(ValueError):
    """The submission cannot be graded; the message says why."""


def aligned(submission: Any, answers: Any) -> tuple[Any, Any]:
    """Predictions and answers as float arrays in the answers' id order."""
    import numpy as np  # deferred: numpy only when this runs (112 modules)
    import pandas as pd  # deferred: pandas only when this runs (507 modules)

    columns = list(submission.columns)
    if columns != [ID, TARGET]:
        raise InvalidSubmission(f"columns must be {ID},{TARGET}, got {','.join(map(str, columns)) or 'none'}")
    if len(submission) != len(answers):
        raise InvalidSubmission(f"{len(submission)} rows, expected {len(answers)}")
    if submission[ID].duplicated().any():
        raise InvalidSubmission("duplicate ids")
    ids = pd.to_numeric(submission[ID], errors="coerce")
    if ids.isna().any() or set(ids.astype(int)) != set(answers[ID].astype(int)):
        raise InvalidSubmission("the ids differ from the test set's")
    merged = answers[[ID]].merge(submission.assign(**{ID: ids.astype(int)}), on=ID, how="left")
    predictions = pd.to_numeric(merged[TARGET], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(predictions).all():
        raise InvalidSubmission("every target must be a finite number")
    return predictions, answers[TARGET].to_numpy(dtype=float)


def accuracy(submission: Any, answers: Any) -> float:
    """Share of exactly right labels (higher is better)."""
    predicted, truth = aligned(submission, answers)
    return float((predicted == truth).mean())


def rmse(submission: Any, answers: Any) -> float:
    """Root mean squared error (lower is better)."""
    import numpy as np  # deferred: numpy only when this runs (112 modules)

    predicted, truth = aligned(submission, answers)
    return float(np.sqrt(np.mean((predicted - truth) ** 2)))


def auc(submission: Any, answers: Any) -> float:
    """Area under the ROC curve of the predicted probability of class 1 (higher is better)."""
    from sklearn.metrics import roc_auc_score  # deferred: sklearn only when this runs (1473 modules)

    predicted, truth = aligned(submission, answers)
    if ((predicted < 0) | (predicted > 1)).any():
        raise InvalidSubmission("probabilities must lie in [0, 1]")
    return float(roc_auc_score(truth, predicted))
