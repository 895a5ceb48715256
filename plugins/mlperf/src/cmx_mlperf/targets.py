"""What the official submission checker (mlcommons/inference ``tools/submission``, version
v6.1) expects of an LLM benchmark: the detail-log field it reads as the headline result,
the accuracy targets at 99 % and 99.9 % of the FP32 reference, and the reference weights and
dataset a closed-division result must use.

These are facts read from the checker's ``constants.py`` (``RESULT_FIELD_NEW``,
``RESULT_FIELD_BENCHMARK_OVERWRITE``, ``MODEL_CONFIG[...]["accuracy-target"]`` and
``["accuracy-upper-limit"]``; benchmarks the v6.1 round dropped come from the last round that
listed them: mixtral-8x7b, llama3.1-405b and llama2-70b-99 from v6.0, gptj from v5.0) and the
reference implementations' READMEs. No checker code is copied; the rules are written here.

Keys are cmx's model keys (those of LoadGen's embedded ``mlperf.conf``: ``llama3_1-8b``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CHECKER_VERSION = "v6.1"

#: The detail-log key the checker reads as a scenario's result (``RESULT_FIELD_NEW``).
RESULT_FIELD = {
    "Offline": "result_samples_per_second",
    "SingleStream": "early_stopping_latency_ss",
    "MultiStream": "early_stopping_latency_ms",
    "Server": "result_completed_samples_per_sec",
}
_TOKENS = {"Offline": "result_tokens_per_second", "Server": "result_completed_tokens_per_second"}
#: Per-benchmark replacements (``RESULT_FIELD_BENCHMARK_OVERWRITE``). The edge Llama's
#: SingleStream result is the plain p90 query latency: with token latencies on, LoadGen's
#: ``early_stopping_latency_ss`` is the first-token estimate.
RESULT_FIELD_OVERRIDE: dict[str, dict[str, str]] = {
    "llama2-70b": dict(_TOKENS),
    "llama3_1-8b": dict(_TOKENS),
    "llama3_1-8b-edge": {"Offline": "result_tokens_per_second",
                         "SingleStream": "result_90.00_percentile_latency_ns"},
    "mixtral-8x7b": dict(_TOKENS),
    "llama3_1-405b": dict(_TOKENS),
    "deepseek-r1": dict(_TOKENS),
    "gpt-oss-120b": dict(_TOKENS),
    "whisper": {"Offline": "result_tokens_per_second"},
    # v5.0, the last round with gptj: LoadGen infers its token counts
    "gptj": {"Offline": "result_inferred_tokens_per_second",
             "Server": "result_inferred_completed_tokens_per_second"},
}
#: A scenario a datacenter benchmark does not have is filed under its edge twin (as the
#: export does), so its headline follows the twin's rule.
_EDGE_TWIN = {("llama3_1-8b", "SingleStream"): "llama3_1-8b-edge"}


def result_field(model: str, scenario: str) -> str:
    """The detail-log key the checker reads as the result of ``model`` in ``scenario``."""
    benchmark = _EDGE_TWIN.get((model, scenario), model)
    return RESULT_FIELD_OVERRIDE.get(benchmark, {}).get(scenario, RESULT_FIELD[scenario])


# -- accuracy targets -------------------------------------------------------------------

#: cmx accuracy names -> the checker's metric names.
CHECKER_METRIC = {"rouge1": "ROUGE1", "rouge2": "ROUGE2", "rougeL": "ROUGEL",
                  "rougeLsum": "ROUGELSUM", "gen_len": "GEN_LEN",
                  "tokens_per_sample": "TOKENS_PER_SAMPLE", "exact_match": "exact_match",
                  "gsm8k": "gsm8k_accuracy", "mbxp": "mbxp_accuracy"}
#: Length metrics are held to 90 %-110 % of the reference whatever the variant.
_LENGTH = frozenset({"gen_len", "tokens_per_sample"})


@dataclass(frozen=True)
class Benchmark:
    """An LLM benchmark's reference: FP32 accuracy, weights and dataset."""

    reference: Mapping[str, float]  # cmx accuracy name -> FP32 reference value
    variants: tuple[str, ...]  # the accuracy variants the checker lists ("99", "99.9")
    weights: str  # Hugging Face id of the reference weights
    parameters: float  # their parameter count
    dataset: str
    dataset_size: int
    aliases: tuple[str, ...] = ()  # other names of the same weights
    digests: frozenset[str] = field(default_factory=frozenset)  # known manifest digests of the weights
    dataset_digests: frozenset[str] = field(default_factory=frozenset)  # known digests of the dataset


_CNNDM = "CNN/DailyMail 3.0.0 validation (cnn_eval.json)"
BENCHMARKS: dict[str, Benchmark] = {
    "llama3_1-8b": Benchmark(
        {"rouge1": 38.7792, "rouge2": 15.9075, "rougeL": 24.4957, "rougeLsum": 35.793,
         "gen_len": 8167644}, ("99",),
        "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, _CNNDM, 13368,
        aliases=("meta-llama/Meta-Llama-3.1-8B-Instruct",)),
    "llama3_1-8b-edge": Benchmark(
        {"rouge1": 39.06, "rouge2": 16.1147, "rougeL": 24.6375, "rougeLsum": 36.124,
         "gen_len": 3051113}, ("99",),
        "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, _CNNDM + ", edge subset", 5000,
        aliases=("meta-llama/Meta-Llama-3.1-8B-Instruct",)),
    "llama2-70b": Benchmark(
        {"rouge1": 44.4312, "rouge2": 22.0352, "rougeL": 28.6162, "tokens_per_sample": 294.45},
        ("99", "99.9"), "meta-llama/Llama-2-70b-chat-hf", 6.9e10, "OpenOrca (GPT-4 subset)", 24576),
    "mixtral-8x7b": Benchmark(
        {"rouge1": 45.5989, "rouge2": 23.3526, "rougeL": 30.4608, "tokens_per_sample": 144.84,
         "gsm8k": 73.66, "mbxp": 60.16}, ("99",),
        "mistralai/Mixtral-8x7B-Instruct-v0.1", 4.67e10, "OpenOrca + GSM8K + MBXP mix", 15000),
    "llama3_1-405b": Benchmark(
        {"rougeL": 21.6666, "exact_match": 90.1335, "tokens_per_sample": 684.68}, ("99",),
        "meta-llama/Llama-3.1-405B-Instruct", 4.05e11, "LongBench/RULER/GovReport mix", 8313),
    "gptj": Benchmark(
        {"rouge1": 42.9865, "rouge2": 20.1235, "rougeL": 29.9881, "gen_len": 4016878},
        ("99", "99.9"), "EleutherAI/gpt-j-6b (MLCommons CNN-DM fine-tune)", 6.05e9, _CNNDM, 13368,
        aliases=("EleutherAI/gpt-j-6b",)),
    "deepseek-r1": Benchmark(
        {"exact_match": 81.3582, "tokens_per_sample": 3886.2274}, ("99",),
        "deepseek-ai/DeepSeek-R1", 6.71e11, "DeepSeek-R1 mix (AIME, MATH500, GPQA, MMLU-Pro, LiveCodeBench)",
        4388),
    "gpt-oss-120b": Benchmark(
        {"exact_match": 83.13}, ("99",), "openai/gpt-oss-120b", 1.17e11,
        "gpt-oss mix (AIME, GPQA, LiveCodeBench)", 6396),
}
for _name in ("llama2-70b-interactive", "llama3_1-8b-interactive", "llama3_1-405b-interactive",
              "deepseek-r1-interactive", "gpt-oss-120b-interactive"):
    BENCHMARKS[_name] = BENCHMARKS[_name.removesuffix("-interactive")]
#: The checker's upper limit on gpt-oss-120b's tokens per sample (its target has none).
_UPPER_ONLY = {"gpt-oss-120b": {"tokens_per_sample": 1.1 * 9999}}
FRACTIONS = {"99": 0.99, "99.9": 0.999}


def targets(model: str, variant: str = "99") -> list[dict[str, Any]]:
    """The checks of ``model`` at ``variant``: ``{metric, checker_metric, minimum, maximum}``
    (``maximum`` only for length metrics, which are held to 90-110 % of the reference)."""
    bench = BENCHMARKS.get(model)
    if bench is None:
        return []
    out: list[dict[str, Any]] = []
    for name, ref in bench.reference.items():
        length = name in _LENGTH
        out.append({"metric": name, "checker_metric": CHECKER_METRIC[name],
                    "minimum": ref * (0.9 if length else FRACTIONS[variant]),
                    "maximum": ref * 1.1 if length else None})
    for name, maximum in _UPPER_ONLY.get(model, {}).items():
        out.append({"metric": name, "checker_metric": CHECKER_METRIC[name], "minimum": None,
                    "maximum": maximum})
    return out


def check_accuracy(model: str, accuracy: Mapping[str, Any]) -> dict[str, Any] | None:
    """Each variant's checks against ``accuracy``, or None for a model without targets.

    ``{"checker_version", "official_variants", "variants": {"99": {"met", "checks": [...]}}}``;
    a check whose metric the run did not report is not met (the checker requires it)."""
    bench = BENCHMARKS.get(model)
    if bench is None:
        return None
    variants: dict[str, Any] = {}
    for variant in FRACTIONS:
        checks = []
        for target in targets(model, variant):
            value = accuracy.get(target["metric"])
            number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            met = number is not None and math.isfinite(number) and (
                target["minimum"] is None or number >= target["minimum"]) and (
                target["maximum"] is None or number <= target["maximum"])
            checks.append({**target, "value": number, "met": met})
        variants[variant] = {"met": all(c["met"] for c in checks), "checks": checks}
    return {"checker_version": CHECKER_VERSION, "official_variants": list(bench.variants),
            "variants": variants}


def accuracy_blockers(model: str, accuracy: Mapping[str, Any]) -> list[str]:
    """One blocker per missed check of the loosest official variant (99 %)."""
    result = check_accuracy(model, accuracy)
    if result is None:
        return []
    variant = result["official_variants"][0]
    out = []
    for c in result["variants"][variant]["checks"]:
        if c["met"]:
            continue
        name = c["metric"]
        if c["value"] is None:
            out.append(f"accuracy {name} was not reported; the checker requires {c['checker_metric']}")
        elif c["minimum"] is not None and c["value"] < c["minimum"]:
            out.append(f"accuracy {name} {c['value']:.4f} is below the {model}-{variant} target "
                       f"{c['minimum']:.4f}")
        else:
            out.append(f"accuracy {name} {c['value']:.4f} is above the upper limit {c['maximum']:.4f}")
    return out


# -- model and dataset identity ------------------------------------------------------------

def _norm(text: str) -> str:
    return text.strip().rstrip("/").lower()


#: Identity verdicts (docs/models.md): ``reference`` only when the digest is a known digest of
#: the reference; a name match alone is ``named-like-reference`` ("not verified").
REFERENCE, NAMED_LIKE, OTHER, UNKNOWN = "reference", "named-like-reference", "other", "unknown"


def model_identity(model: str, names: list[str], digest: Any) -> dict[str, Any]:
    """What the run's weights are, for the result: the verdict, the digest and the reference
    they were compared with. ``reference`` needs the digest; a name is never enough."""
    bench = BENCHMARKS.get(model)
    shown = digest if isinstance(digest, str) and digest else None
    if bench is None:
        return {"verdict": UNKNOWN, "digest": shown, "reference": None}
    refs = [bench.weights, *bench.aliases]
    wanted = {_norm(r) for r in refs} | {_norm(r.split("/")[-1]) for r in refs}
    named = any(_norm(n) in wanted or _norm(n).split("/")[-1] in wanted for n in names if n)
    by_digest = shown is not None and shown.lower() in bench.digests
    verdict = REFERENCE if by_digest else (NAMED_LIKE if named else OTHER)
    return {"verdict": verdict, "digest": shown, "reference": bench.weights,
            "known_digests": len(bench.digests)}


def dataset_identity(model: str, dataset: Mapping[str, Any] | None) -> dict[str, Any]:
    """The same for the dataset: ``reference`` only when its recorded digest is a known
    digest of the benchmark's reference dataset (``dataset_digests``)."""
    bench = BENCHMARKS.get(model)
    name = (dataset or {}).get("name")
    raw = (dataset or {}).get("sha256") or (dataset or {}).get("digest")
    digest = raw if isinstance(raw, str) and raw else None
    if bench is None:
        return {"verdict": UNKNOWN, "name": name, "digest": digest, "reference": None}
    if digest is not None and digest.lower() in bench.dataset_digests:
        verdict = REFERENCE
    elif isinstance(name, str) and _norm(name) == _norm(bench.dataset):
        verdict = NAMED_LIKE
    else:
        verdict = OTHER
    return {"verdict": verdict, "name": name, "digest": digest, "reference": bench.dataset,
            "known_digests": len(bench.dataset_digests)}


def identity_blockers(model: str, names: list[str], parameters: Any, digest: Any,
                      dataset: Mapping[str, Any] | None, total_samples: Any) -> list[str]:
    """Why the run's weights or dataset are not the benchmark's reference ones (empty when
    their digests say they are). ``names``: the model's recorded name, source path or id."""
    bench = BENCHMARKS.get(model)
    if bench is None:
        return []
    out: list[str] = []
    weights = model_identity(model, names, digest)
    digest_shown = weights["digest"] or "none recorded"
    if weights["verdict"] == NAMED_LIKE:
        out.append(f"model is named like the reference weights {bench.weights}, not verified "
                   f"(digest: {digest_shown}; {_known(len(bench.digests))})")
    elif weights["verdict"] == OTHER:
        shown = ", ".join(repr(n) for n in names if n) or "none recorded"
        out.append(f"model is not the reference weights {bench.weights} (name: {shown}; "
                   f"digest: {digest_shown})")
    if isinstance(parameters, int) and not isinstance(parameters, bool) and not (
            0.9 * bench.parameters <= parameters <= 1.1 * bench.parameters):
        out.append(f"model has {parameters:,} parameters; the reference weights {bench.weights} "
                   f"have about {bench.parameters:.3g}")
    data = dataset_identity(model, dataset)
    if data["verdict"] == NAMED_LIKE:
        out.append(f"dataset is named like the reference dataset {bench.dataset}, not verified "
                   f"(digest: {data['digest'] or 'none recorded'}; {_known(len(bench.dataset_digests))})")
    elif data["verdict"] == OTHER:
        out.append(f"dataset is not the reference dataset {bench.dataset} "
                   f"(dataset: {data['name'] or 'none recorded'})")
    if isinstance(total_samples, int) and total_samples != bench.dataset_size:
        out.append(f"the QSL holds {total_samples} samples; the reference dataset has {bench.dataset_size}")
    return out


def _known(count: int) -> str:
    return f"{count} known digest(s)" if count else "no digest of it is known offline (docs/models.md)"
