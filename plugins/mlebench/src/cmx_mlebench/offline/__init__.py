"""Competitions built here from datasets scikit-learn ships (nothing is downloaded), in
MLE-bench's layout. Their leaderboards are the scores of a fixed pool of simple baseline
models on the prepared split and are labelled ``leaderboard_source: synthetic``."""

from __future__ import annotations

from pathlib import Path

DEFINITIONS = Path(__file__).parent / "definitions"
BASELINES = Path(__file__).parent / "baselines"

BUILTIN = ("sklearn-breast-cancer", "sklearn-diabetes", "sklearn-digits")
"""The shipped competitions: AUC (higher is better), RMSE (lower is better), accuracy (higher is better)."""


def is_builtin(competition: str) -> bool:
    return competition in BUILTIN
