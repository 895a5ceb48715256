"""Baseline agent of sklearn-diabetes: a 50-tree random forest regressor, leaves of 5 or more rows, seeded by $SEED."""

import importlib
import os
import sys

from sklearn.ensemble import RandomForestRegressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
common = importlib.import_module("common")
common.solve(RandomForestRegressor(n_estimators=50, min_samples_leaf=5, random_state=common.seed(), n_jobs=1))
