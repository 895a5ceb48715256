"""The validated description of one LoadGen test (what the parent hands the child).

Built from the ``mlperf.loadgen`` step's ``with:`` values by :func:`spec_from_params`;
bad values raise :class:`cmx_core.errors.UsageError` naming the key and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_mlperf.sut import SUT_FACTORIES

SCENARIOS = ("Offline", "Server", "SingleStream", "MultiStream")
MODES = ("PerformanceOnly", "AccuracyOnly", "FindPeakPerformance", "PeakQPS")
#: Harness modes that are not LoadGen's: the step runs several LoadGen tests itself.
HARNESS_MODES = ("PeakQPS",)
_ALIASES = {s.lower(): s for s in SCENARIOS + MODES}
_ALIASES.update({"performance": "PerformanceOnly", "accuracy": "AccuracyOnly",
                 "findpeak": "FindPeakPerformance", "peak-qps": "PeakQPS", "single-stream": "SingleStream",
                 "multi-stream": "MultiStream"})

_NUMBERS = ("target_qps", "target_latency_ms", "duration_s", "expected_qps",
            "expected_latency_ms", "ttft_ms", "tpot_ms", "timeout_s", "price_per_hour",
            "power_sample_ms")
_INTEGERS = ("min_query_count", "max_query_count", "performance_sample_count",
             "samples_per_query", "search_runs", "sweep_points")


@dataclass(frozen=True)
class LoadgenSpec:
    """One LoadGen test. ``None`` means "leave LoadGen's embedded mlperf.conf value"
    (or, for the expected QPS / latency, "calibrate": see :mod:`cmx_mlperf.harness.calibrate`)."""

    sut: str
    scenario: str
    mode: str = "PerformanceOnly"
    model_name: str = "resnet50"
    sut_params: dict[str, Any] = field(default_factory=dict)
    target_qps: float | None = None
    target_latency_ms: float | None = None
    duration_s: float | None = None
    min_query_count: int | None = None
    max_query_count: int | None = None
    expected_qps: float | None = None
    expected_latency_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    performance_sample_count: int | None = None
    samples_per_query: int | None = None
    accuracy: bool | None = None
    timeout_s: float | None = None
    price_per_hour: float | None = None  # USD per hour of the system: cost per million tokens
    power_sample_ms: float | None = None  # power sampling period during the test (None: default)
    search_runs: int | None = None  # PeakQPS: LoadGen tests the search may run at most
    sweep_points: int | None = None  # PeakQPS: curve points up to 1.2 x the peak

    @property
    def wants_accuracy(self) -> bool:
        """Accuracy is computed in AccuracyOnly mode unless ``accuracy: false``."""
        return self.mode == "AccuracyOnly" and self.accuracy is not False

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_file(cls, path: Path) -> LoadgenSpec:
        return cls(**json.loads(path.read_text()))


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    name = _ALIASES.get(str(value).strip().lower())
    if name not in choices:
        raise UsageError(
            f"mlperf.loadgen: {key} {value!r} is not known; use one of: {', '.join(choices)}"
        )
    return name


def _number(key: str, value: Any, integer: bool) -> float | int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise UsageError(f"mlperf.loadgen: {key}={value!r} must be {kind}") from None
    if number < 0:
        raise UsageError(f"mlperf.loadgen: {key}={value!r} must not be negative")
    return number


def _boolean(key: str, value: Any) -> bool | None:
    if value is None or value == "" or isinstance(value, bool):
        return value if isinstance(value, bool) else None
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"mlperf.loadgen: {key}={value!r} must be true or false")


def spec_from_params(params: Mapping[str, Any]) -> LoadgenSpec:
    """Validate the step's ``with:`` mapping into a :class:`LoadgenSpec`."""
    sut = str(params.get("sut") or "")
    if sut not in SUT_FACTORIES:
        raise UsageError(
            f"mlperf.loadgen: sut {sut!r} is not known; use one of: {', '.join(sorted(SUT_FACTORIES))}"
        )
    if "scenario" not in params:
        raise UsageError(f"mlperf.loadgen: scenario is required; use one of: {', '.join(SCENARIOS)}")
    scenario = _choice("scenario", params["scenario"], SCENARIOS)
    mode = _choice("mode", params.get("mode") or "PerformanceOnly", MODES)
    if mode in ("FindPeakPerformance", "PeakQPS") and scenario != "Server":
        raise UsageError(f"mlperf.loadgen: mode {mode} works only with scenario Server")
    sut_params = params.get("sut_params") or {}
    if not isinstance(sut_params, Mapping):
        raise UsageError("mlperf.loadgen: sut_params must be a mapping")
    values: dict[str, Any] = {k: _number(k, params.get(k), False) for k in _NUMBERS}
    values.update({k: _number(k, params.get(k), True) for k in _INTEGERS})
    if values["duration_s"] == 0:
        raise UsageError("mlperf.loadgen: duration_s must be > 0")
    return LoadgenSpec(
        sut=sut,
        scenario=scenario,
        mode=mode,
        model_name=str(params.get("model_name") or "resnet50"),
        sut_params=_plain(sut_params),
        accuracy=_boolean("accuracy", params.get("accuracy")),
        **values,
    )


def _plain(value: Any) -> Any:
    """Read-only mappings/sequences from the engine -> plain JSON-able dict/list."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
