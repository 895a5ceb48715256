"""LoadGen configuration: model keys of the embedded ``mlperf.conf``, the official values
the submission rules require, and the ``user.conf`` the harness writes for a test.

The embedded ``mlperf.conf`` (compiled into ``mlperf_loadgen`` 6.0.17) holds the official
seeds and per-model settings; the harness only writes a ``user.conf`` with the user's
overrides, so the official seeds are never touched (LoadGen ignores seeds in user.conf).
"""

from __future__ import annotations

from dataclasses import dataclass

from cmx_mlperf.harness.spec import LoadgenSpec

#: Model keys of the embedded mlperf.conf (6.0.17).
KNOWN_MODELS = frozenset({
    "resnet50", "ssd-mobilenet", "retinanet", "bert", "dlrm", "dlrm-v2", "dlrm-v3", "rnnt",
    "gptj", "mixtral-8x7b", "llama2-70b", "llama2-70b-interactive", "llama3_1-405b",
    "llama3_1-405b-interactive", "llama3_1-8b", "llama3_1-8b-edge", "llama3_1-8b-interactive",
    "stable-diffusion-xl", "wan-2.2-t2v-a14b", "rgat", "pointpainting", "deepseek-r1",
    "deepseek-r1-interactive", "whisper", "qwen3-vl-235b-a22b", "yolo", "3d-unet",
    "gpt-oss-120b", "gpt-oss-120b-interactive",
})

#: Official seeds of the embedded mlperf.conf (match checker --version v6.1).
OFFICIAL_SEEDS = {
    "qsl_rng_seed": 2085463073848966840,
    "sample_index_rng_seed": 2747215439041700203,
    "schedule_rng_seed": 16159082839903944936,
}
OFFICIAL_MIN_DURATION_MS = 600_000
#: Checker minimum query counts (Offline: samples come from OFFLINE_MIN_SAMPLES).
CHECKER_MIN_QUERIES = {"SingleStream": 1024, "MultiStream": 270_336, "Server": 270_336, "Offline": 1}
#: Official Offline minimum sample counts, min(dataset size, 24576).
OFFLINE_MIN_SAMPLES = {
    "resnet50": 24576, "retinanet": 24576, "dlrm-v2": 24576, "bert": 10833, "gptj": 13368,
    "rnnt": 2513, "3d-unet": 43, "stable-diffusion-xl": 5000, "wan-2.2-t2v-a14b": 248,
    "llama2-70b": 24576, "llama3_1-405b": 8313, "llama3_1-8b": 13368, "llama3_1-8b-edge": 5000,
    "mixtral-8x7b": 15000, "rgat": 788379, "deepseek-r1": 4388, "whisper": 1633,
    "qwen3-vl-235b-a22b": 48289,
}

#: Official performance sample counts (``performance_sample_count_override``).
PERFORMANCE_SAMPLE_COUNT = {
    "resnet50": 1024, "ssd-mobilenet": 256, "retinanet": 64, "bert": 10833, "dlrm": 204800,
    "dlrm-v2": 204800, "rnnt": 2513, "gptj": 13368, "mixtral-8x7b": 15000, "llama2-70b": 24576,
    "llama3_1-405b": 8313, "llama3_1-8b": 13368, "llama3_1-8b-edge": 5000,
    "stable-diffusion-xl": 5000, "wan-2.2-t2v-a14b": 248, "rgat": 788379, "pointpainting": 1024,
    "deepseek-r1": 4388, "whisper": 1633, "qwen3-vl-235b-a22b": 48289, "yolo": 64,
    "gpt-oss-120b": 6396,
}
#: Official Server latency bounds in ms (``target_latency``; LLMs use TTFT/TPOT instead).
SERVER_TARGET_LATENCY_MS = {
    "resnet50": 15, "retinanet": 100, "bert": 130, "dlrm": 60, "dlrm-v2": 60, "dlrm-v3": 80,
    "rnnt": 1000, "gptj": 20000, "stable-diffusion-xl": 20000, "qwen3-vl-235b-a22b": 12000,
}
#: Official Server TTFT / TPOT limits in ms.
SERVER_TOKEN_LIMITS_MS = {
    "llama2-70b": (2000, 200), "llama2-70b-interactive": (450, 40), "mixtral-8x7b": (2000, 200),
    "llama3_1-405b": (6000, 175), "llama3_1-405b-interactive": (4500, 80),
    "llama3_1-8b": (2000, 100), "llama3_1-8b-interactive": (500, 30),
    "deepseek-r1": (2000, 80), "deepseek-r1-interactive": (1500, 15),
    "gpt-oss-120b": (3000, 80), "gpt-oss-120b-interactive": (2000, 15),
}
#: Accuracy targets the harness can check itself: model -> (metric, minimum).
ACCURACY_TARGETS = {"resnet50": ("top1", 0.76456 * 0.99)}


def conf_model_key(model_name: str) -> str:
    """The embedded config's key for ``model_name`` (``llama3.1-8b`` -> ``llama3_1-8b``)."""
    if model_name in KNOWN_MODELS:
        return model_name
    underscored = model_name.replace(".", "_")
    return underscored if underscored in KNOWN_MODELS else model_name


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class Derived:
    """Values the child derives when the user left them unset (see calibrate.py)."""

    expected_qps: float | None = None
    target_qps: float | None = None
    expected_latency_ms: float | None = None


def user_conf(spec: LoadgenSpec, derived: Derived = Derived()) -> str:
    """The ``user.conf`` text for ``spec``: one ``model.scenario.key = value`` per override.

    ``target_qps`` feeds Offline's expected QPS and Server's target QPS; ``target_latency``
    feeds Server's latency bound and SingleStream/MultiStream's *expected* latency (that is
    how LoadGen reads the key).
    """
    prefix = f"{conf_model_key(spec.model_name)}.{spec.scenario}."
    pairs: list[tuple[str, float]] = []
    if spec.duration_s is not None:
        pairs.append(("min_duration", round(spec.duration_s * 1000)))
    if spec.min_query_count is not None:
        pairs.append(("min_query_count", spec.min_query_count))
    if spec.max_query_count is not None:
        pairs.append(("max_query_count", spec.max_query_count))
    if spec.performance_sample_count is not None:
        pairs.append(("performance_sample_count_override", spec.performance_sample_count))
    if spec.samples_per_query is not None and spec.scenario == "MultiStream":
        pairs.append(("samples_per_query", spec.samples_per_query))
    qps = _scenario_qps(spec, derived)
    if qps is not None:
        pairs.append(("target_qps", qps))
    latency = _scenario_latency_ms(spec, derived)
    if latency is not None:
        pairs.append(("target_latency", latency))
    if spec.ttft_ms is not None:
        pairs.append(("ttft_latency", spec.ttft_ms))
    if spec.tpot_ms is not None:
        pairs.append(("tpot_latency", spec.tpot_ms))
    lines = [f"{prefix}{key} = {_fmt(value)}" for key, value in pairs]
    return "# written by cmx-mlperf: user overrides of the embedded mlperf.conf\n" + "".join(
        line + "\n" for line in lines
    )


def _scenario_qps(spec: LoadgenSpec, derived: Derived) -> float | None:
    if spec.scenario == "Offline":
        return spec.expected_qps or spec.target_qps or derived.expected_qps
    if spec.scenario == "Server":
        return spec.target_qps or derived.target_qps
    return None


def _scenario_latency_ms(spec: LoadgenSpec, derived: Derived) -> float | None:
    if spec.scenario == "Server":
        return spec.target_latency_ms
    if spec.scenario in ("SingleStream", "MultiStream"):
        return spec.expected_latency_ms or derived.expected_latency_ms
    return None


def needs_calibration(spec: LoadgenSpec) -> bool:
    """True when the Offline/Server QPS or the SingleStream/MultiStream expected latency
    was left unset in a timed mode (the traps of workloads.md §1.3 items 5 and 6), or the
    Server QPS of an accuracy run (LoadGen's default of 1 QPS takes hours on a real dataset)."""
    if spec.mode == "AccuracyOnly":
        return spec.scenario == "Server" and _scenario_qps(spec, Derived()) is None
    derived_nothing = Derived()
    if spec.scenario in ("Offline", "Server"):
        return _scenario_qps(spec, derived_nothing) is None
    return _scenario_latency_ms(spec, derived_nothing) is None
