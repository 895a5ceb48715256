"""A model of a metric over a recipe's configurations, learnt from stored runs (#51).

scikit-learn's Gaussian process (``GaussianProcessRegressor``): a constant times an RBF
kernel with one length scale per axis, plus a white-noise kernel that learns the runs' own
noise, fitted by maximum likelihood. A positive metric is modelled in log space (throughput
and latency vary by factors, not offsets), so its interval is asymmetric. A number axis
spanning a factor of 4 or more is also taken in log space (batch sizes, thread counts); a
text axis (an algorithm, a variation) is one-hot. The interval is the predictive normal's
central 90 %, which includes the learnt noise: it is where a new run is expected to land.

A Gaussian process fitted on a few runs tends to take their noise for signal and so to be
too sure. The interval is therefore calibrated by leave-one-out: each run is predicted by
the model fitted on the others (same kernel), and the predictive spread is widened until
90 % of those left-out runs fall inside (never narrowed). The factor is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cmx_core.errors import UsageError
from cmx_core.results.learning_set import LearningSet, Value
from cmx_core.results.numbers import finite_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

MIN_RUNS = 5
"""Fewer comparable runs than this and predict refuses: a model of 4 points is a guess."""
Z90 = 1.6448536269514722
"""The standard normal's 95th percentile: a central 90 % interval is mean +- Z90 * sd."""


@dataclass(frozen=True)
class Prediction:
    """The metric predicted at one configuration: the most likely value and a 90 % interval,
    and whether the configuration lies outside the measured range of a number axis."""

    config: dict[str, Value]
    value: float
    low: float
    high: float
    extrapolated: bool
    measured: bool

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "value": self.value, "interval_90": [self.low, self.high],
                "extrapolated": self.extrapolated, "measured": self.measured}


@dataclass(frozen=True)
class Axis:
    """How one configuration key becomes features: a number (scaled, maybe in log space) or
    one column per value seen."""

    name: str
    levels: tuple[Value, ...]
    numeric: bool
    log: bool
    centre: float = 0.0
    scale: float = 1.0

    def features(self, value: Value) -> list[float]:
        if not self.numeric:
            if value not in self.levels:
                seen = ", ".join(map(str, self.levels))
                raise UsageError(f"{self.name}={value} was never run; the model knows {self.name} = {seen}")
            return [1.0 if value == level else 0.0 for level in self.levels]
        if not isinstance(value, float):
            raise UsageError(f"{self.name}={value}: the runs give {self.name} as a number")
        if self.log and value <= 0:
            raise UsageError(f"{self.name}={value}: the model takes {self.name} in log space (every run had it > 0)")
        return [((math.log(value) if self.log else value) - self.centre) / self.scale]

    def outside(self, value: Value) -> bool:
        numbers = [v for v in self.levels if isinstance(v, float)]
        return self.numeric and isinstance(value, float) and not min(numbers) <= value <= max(numbers)


class Model:
    """A fitted Gaussian process over a learning set's axes."""

    def __init__(self, data: LearningSet) -> None:
        if len(data.observations) < MIN_RUNS:
            raise UsageError(f"{len(data.observations)} comparable run(s) of '{data.recipe}' with {data.metric} on "
                             f"{data.hardware}; a prediction needs at least {MIN_RUNS}: run more points first "
                             f"(cmx sweep --tags={','.join(data.tags)} --matrix KEY=V1,V2,...)")
        if not data.axes:
            raise UsageError(f"every run of '{data.recipe}' has the same configuration: nothing varies to learn from")
        self.data = data
        self.axes = tuple(_axis(data, name) for name in data.axes)
        self.log_target = all(o.value > 0 for o in data.observations)
        features = self._matrix([o.config for o in data.observations])
        targets = [self._target(o.value) for o in data.observations]
        self._gp = _fit(features, targets)
        self.interval_scale = _calibration(self._gp, features, targets)

    def predict(self, configs: Sequence[Mapping[str, Value]]) -> list[Prediction]:
        """The prediction at each configuration (axis values; the fixed inputs as the runs had them)."""
        for config in configs:
            self._check_fixed(config)
        full = [{**self.data.fixed, **config} for config in configs]
        mean, std = self._gp.predict(self._matrix(full), return_std=True)
        return [self._prediction(config, float(m), float(s)) for config, m, s in zip(full, mean, std, strict=True)]

    def _prediction(self, config: dict[str, Value], mean: float, std: float) -> Prediction:
        spread = Z90 * std * self.interval_scale
        low, high = mean - spread, mean + spread
        back = math.exp if self.log_target else float
        return Prediction(config, back(mean), back(low), back(high),
                          any(axis.outside(config[axis.name]) for axis in self.axes), self.data.measured(config))

    def _check_fixed(self, config: Mapping[str, Value]) -> None:
        for key, value in config.items():
            if key in self.data.fixed and value != self.data.fixed[key]:
                raise UsageError(f"{key}={value}: every run it learnt from had {key}={self.data.fixed[key]}, so the "
                                 f"model cannot tell what {key} does; run other values of it first")
            if key not in self.data.fixed and key not in self.data.axes:
                raise UsageError(f"{key}: not an input of these runs (their axes: {', '.join(self.data.axes)})")
        missing = [a for a in self.data.axes if a not in config]
        if missing:
            raise UsageError(f"give a value for {', '.join(missing)} (the runs vary it): --at "
                             + ",".join(f"{a}=..." for a in missing))

    def _matrix(self, configs: Sequence[Mapping[str, Value]]) -> list[list[float]]:
        return [[x for axis in self.axes for x in axis.features(config[axis.name])] for config in configs]

    def _target(self, value: float) -> float:
        return math.log(value) if self.log_target else value


def _axis(data: LearningSet, name: str) -> Axis:
    levels = tuple(data.levels(name))
    if not all(isinstance(v, float) for v in levels):
        return Axis(name, tuple(str(v) for v in levels), numeric=False, log=False)
    numbers = [float(v) for v in levels]
    log = min(numbers) > 0 and max(numbers) / min(numbers) >= 4
    scaled = [math.log(v) if log else v for v in numbers]
    centre = sum(scaled) / len(scaled)
    spread = (max(scaled) - min(scaled)) or 1.0
    return Axis(name, levels, numeric=True, log=log, centre=centre, scale=spread)


def _fit(features: list[list[float]], targets: list[float]) -> Any:
    """The Gaussian process, its hyperparameters fitted by maximum likelihood (seeded).
    scikit-learn's ConvergenceWarning (a length scale at its bound: the metric does not
    change along that axis) is not shown: the leave-one-out calibration judges the fit."""
    import warnings  # deferred: only a fit needs it

    from sklearn.exceptions import ConvergenceWarning  # deferred: scikit-learn only when this runs
    from sklearn.gaussian_process import GaussianProcessRegressor  # deferred: as above
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel  # deferred: as above

    width = len(features[0])
    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * RBF(length_scale=[0.5] * width, length_scale_bounds=(1e-2, 1e2))
              + WhiteKernel(1e-2, (1e-8, 1e1)))
    model = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(features, targets)


def _calibration(gp: Any, features: list[list[float]], targets: list[float]) -> float:
    """How much to widen the predictive spread so that 90 % of the runs, each predicted by
    the model fitted on the others (the fitted kernel, not refitted), fall inside: the 90th
    percentile of their standardised errors over Z90, at least 1."""
    from sklearn.gaussian_process import GaussianProcessRegressor  # deferred: scikit-learn only when this runs

    errors = []
    for i in range(len(targets)):
        rest = [j for j in range(len(targets)) if j != i]
        loo = GaussianProcessRegressor(gp.kernel_, optimizer=None, normalize_y=True)
        loo.fit([features[j] for j in rest], [targets[j] for j in rest])
        mean, std = loo.predict([features[i]], return_std=True)
        errors.append(abs(targets[i] - float(mean[0])) / max(float(std[0]), 1e-12))
    errors.sort()
    q90 = errors[min(len(errors) - 1, math.ceil(0.9 * len(errors)) - 1)]
    return max(1.0, q90 / Z90)


def parse_config(text: str) -> dict[str, Value]:
    """``--at batch=64,threads=4``: numbers as numbers, anything else as text."""
    config: dict[str, Value] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--at {text}: expected KEY=VALUE[,KEY=VALUE...]")
        number = finite_number(raw.strip())
        config[key.strip()] = raw.strip() if number is None else number
    return config
