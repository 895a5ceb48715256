"""Baseline agent of sklearn-breast-cancer: the probability of class 1 from a 50-tree random forest, seeded by $SEED."""

import importlib
import os
import sys

from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
common = importlib.import_module("common")
common.solve(RandomForestClassifier(n_estimators=50, random_state=common.seed(), n_jobs=1), proba=True)
