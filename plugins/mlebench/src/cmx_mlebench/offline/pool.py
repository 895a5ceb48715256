"""The synthetic leaderboard of an offline competition: a fixed pool of simple baseline
models (dummies, naive Bayes, k nearest neighbours over several k, logistic regression on
standardised features or ridge regression over several strengths, shallow trees; every
random part seeded), each fitted on the public train set and scored on the private test set
by the competition's own grader. Its rows are labelled ``synthetic``; they are no Kaggle
team's scores."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from cmx_mlebench.offline.datasets import TASKS
from cmx_mlebench.offline.graders import ID, TARGET

Factory = Callable[[], Any]


def _scaled_logreg(c: float) -> Any:
    from sklearn.linear_model import LogisticRegression  # deferred: sklearn only when this runs (1505 modules)
    from sklearn.pipeline import make_pipeline  # deferred: sklearn only when this runs (1427 modules)
    from sklearn.preprocessing import StandardScaler  # deferred: sklearn only when this runs (1424 modules)

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000))


def classifiers() -> list[tuple[str, Factory]]:
    from sklearn.dummy import DummyClassifier  # deferred: sklearn only when this runs (1351 modules)
    from sklearn.naive_bayes import GaussianNB  # deferred: sklearn only when this runs (1425 modules)
    from sklearn.neighbors import KNeighborsClassifier  # deferred: sklearn only when this runs (1540 modules)
    from sklearn.tree import DecisionTreeClassifier  # deferred: sklearn only when this runs (1550 modules)

    pool: list[tuple[str, Factory]] = [
        ("dummy-most-frequent", partial(DummyClassifier, strategy="most_frequent")),
        ("dummy-stratified", partial(DummyClassifier, strategy="stratified", random_state=0)),
        ("gaussian-nb", GaussianNB),
    ]
    pool += [(f"knn-k{k}", partial(KNeighborsClassifier, n_neighbors=k)) for k in (1, 3, 5, 9, 15, 31, 63)]
    pool += [(f"logreg-c{c:g}", partial(_scaled_logreg, c))
             for c in (1e-4, 1e-3, 1e-2, 1e-1)]
    pool += [(f"tree-depth{d}", partial(DecisionTreeClassifier, max_depth=d, random_state=0))
             for d in (1, 2, 3, 5, 8)]
    return pool


def regressors() -> list[tuple[str, Factory]]:
    from sklearn.dummy import DummyRegressor  # deferred: sklearn only when this runs (1351 modules)
    from sklearn.linear_model import Ridge  # deferred: sklearn only when this runs (1505 modules)
    from sklearn.neighbors import KNeighborsRegressor  # deferred: sklearn only when this runs (1540 modules)
    from sklearn.tree import DecisionTreeRegressor  # deferred: sklearn only when this runs (1550 modules)

    pool: list[tuple[str, Factory]] = [
        ("dummy-mean", partial(DummyRegressor, strategy="mean")),
        ("dummy-median", partial(DummyRegressor, strategy="median")),
    ]
    pool += [(f"knn-k{k}", partial(KNeighborsRegressor, n_neighbors=k)) for k in (1, 3, 5, 9, 15, 31, 63)]
    pool += [(f"ridge-a{a:g}", partial(Ridge, alpha=a)) for a in (0.01, 0.1, 1.0, 10.0, 100.0)]
    pool += [(f"tree-depth{d}", partial(DecisionTreeRegressor, max_depth=d, random_state=0))
             for d in (1, 2, 3, 5, 8)]
    return pool


def _predict(model: Any, features: Any, metric: str) -> Any:
    return model.predict_proba(features)[:, 1] if metric == "auc" else model.predict(features)


def pool_scores(competition: str, public: Path, answers: Path,
                grade: Callable[[Any, Any], float]) -> list[tuple[str, float]]:
    """(model name, rounded score) of every model of the pool (one BLAS thread: on a shared
    machine more threads only contend)."""
    import pandas as pd  # deferred: pandas only when this runs (493 modules)
    from threadpoolctl import threadpool_limits  # deferred: threadpoolctl only when this runs (7 modules)

    task = TASKS[competition]
    train = pd.read_csv(public / "train.csv")
    test = pd.read_csv(public / "test.csv")
    truth = pd.read_csv(answers)
    features = [c for c in train.columns if c not in (ID, TARGET)]
    models = classifiers() if task.kind == "classification" else regressors()
    scores: list[tuple[str, float]] = []
    for name, make in models:
        with threadpool_limits(limits=1):
            model = make().fit(train[features], train[TARGET])
        submission = pd.DataFrame({ID: test[ID], TARGET: _predict(model, test[features], task.metric)})
        scores.append((name, round(float(grade(submission, truth)), 5)))
    return scores
