"""Shared by the baseline agents: read /home/data, fit the model, write
/home/submission/submission.csv, check it with validate_submission (valid or invalid only)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

DATA = "/home/data"
SUBMISSION = "/home/submission/submission.csv"


def seed() -> int:
    """The run's seed, as cmx gives it to the agent."""
    return int(os.environ.get("SEED", "0"))


def solve(model: Any, proba: bool = False) -> None:
    import pandas as pd  # deferred: pandas only when this runs (496 modules)

    train = pd.read_csv(f"{DATA}/train.csv")
    test = pd.read_csv(f"{DATA}/test.csv")
    features = [c for c in train.columns if c not in ("id", "target")]
    model.fit(train[features], train["target"])
    predicted = model.predict_proba(test[features])[:, 1] if proba else model.predict(test[features])
    os.makedirs(os.path.dirname(SUBMISSION), exist_ok=True)
    pd.DataFrame({"id": test["id"], "target": predicted}).to_csv(SUBMISSION, index=False)
    check = subprocess.run(["validate_submission", SUBMISSION], capture_output=True, text=True, check=False)
    print(check.stdout.strip())
