"""Map a parsed detail log onto cmx's normalized result (:class:`ResultPart`).

* ``status``: LoadGen's own verdict (``VALID`` -> ``valid``, else ``invalid``), with
  ``invalid_reasons`` in LoadGen's words.
* SUT errors (the optional ``errors()`` of the SUT contract): status ``error`` (``invalid``
  when LoadGen said INVALID), the SUT's reasons appended to ``invalid_reasons``, the count in
  ``mlperf.failed_samples``, and TTFT/TPOT null (failed samples with 0-1 tokens corrupt
  LoadGen's ``(latency - TTFT) / (n_tokens - 1)``); throughput keeps LoadGen's numbers.
* ``mlperf.submission_blockers``: what keeps the run from being a closed-division result
  under the official rules (workloads.md §1.7), even when LoadGen says VALID; the division is
  always ``unofficial`` (nobody reviewed the run).
* Metrics keep LoadGen's native units (``ns``, ``samples/s``, ``queries/s``, ``tokens/s``)
  with the unit in latency key names.
"""

from __future__ import annotations

from typing import Any, Literal

from cmx_core.api import Metric, ResultPart
from cmx_mlperf import targets
from cmx_mlperf.harness import config as cfg
from cmx_mlperf.harness.mllog import DetailLog
from cmx_mlperf.harness.spec import LoadgenSpec
from cmx_mlperf.power.cost import cost_section

#: The summary.csv ``Units`` of each scenario (tokens/s replaces samples for LLMs).
UNITS = {"Offline": "Samples/s", "Server": "Queries/s", "SingleStream": "Latency (ms)",
         "MultiStream": "Latency (ms)"}
_FLAGS = (  # detail key, LoadGen's own summary wording when the check failed
    ("result_min_duration_met", "Min duration satisfied : NO"),
    ("result_min_queries_met", "Min queries satisfied : NO"),
    ("early_stopping_met", "Early stopping satisfied: NO"),
    ("result_perf_constraints_met", "Performance constraints satisfied : NO"),
)
_EFFECTIVE = ("target_qps", "target_latency_ns", "min_duration_ms", "max_duration_ms",
              "min_query_count", "max_query_count", "performance_sample_count",
              "samples_per_query", "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed",
              "sample_concatenate_permutation", "target_latency_percentile")


def _metric(value: Any, unit: str, higher: bool) -> Metric:
    return Metric(value if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                  unit, higher)


def uses_tokens(log: DetailLog) -> bool:
    return bool(log.get("requested_use_token_latencies")) or "result_first_token_mean_latency_ns" in log.values


def performance_metrics(log: DetailLog, scenario: str, model: str = "") -> tuple[dict[str, Metric], str]:
    """Throughput / latency metrics and the name of the primary one: the value the official
    checker reads for ``model`` (a cmx model key) in ``scenario`` (:func:`targets.result_field`).

    SingleStream/MultiStream keep LoadGen's early-stopping estimate as
    ``early_stopping_latency_ns``; with token latencies on it estimates the *first-token*
    latency, so benchmarks whose checker result is the p90 query latency (the edge Llama)
    get ``latency_p90_ns`` as primary."""
    metrics: dict[str, Metric] = {}
    field = targets.result_field(model, scenario)
    if scenario == "Offline":
        metrics["samples_per_second"] = _metric(log.get("result_samples_per_second"), "samples/s", True)
        primary = "samples_per_second"
    elif scenario == "Server":
        metrics["completed_samples_per_second"] = _metric(
            log.get("result_completed_samples_per_sec"), "queries/s", True)
        metrics["scheduled_samples_per_second"] = _metric(
            log.get("result_scheduled_samples_per_sec"), "queries/s", True)
        primary = "completed_samples_per_second"
    else:
        key = "early_stopping_latency_ss" if scenario == "SingleStream" else "early_stopping_latency_ms"
        metrics["early_stopping_latency_ns"] = _metric(log.get(key), "ns", False)
        metrics["queries_per_second"] = _metric(log.get("result_qps_with_loadgen_overhead"), "queries/s", True)
        primary = "early_stopping_latency_ns" if field == key else _LATENCY_FIELDS[field]
        if scenario == "SingleStream":
            metrics["queries_per_second_without_loadgen_overhead"] = _metric(
                log.get("result_qps_without_loadgen_overhead"), "queries/s", True)
    for name, value in log.latency_ns().items():
        metrics[f"latency_{name}_ns"] = _metric(value, "ns", False)
    if uses_tokens(log):
        if "tokens_per_second" in field and field in log.values:
            tokens = log.get(field)
        else:
            tokens = log.get("result_tokens_per_second", log.get("result_completed_tokens_per_second"))
        metrics["tokens_per_second"] = _metric(tokens, "tokens/s", True)
        primary = "tokens_per_second" if scenario in ("Offline", "Server") else primary
        for prefix, summary in (("ttft", log.ttft_ns()), ("tpot", log.tpot_ns())):
            for name, value in summary.items():
                metrics[f"{prefix}_{name}_ns"] = _metric(value, "ns", False)
    return metrics, primary


#: Checker result fields that are plain percentiles -> cmx's metric of that percentile.
_LATENCY_FIELDS = {"result_90.00_percentile_latency_ns": "latency_p90_ns",
                   "result_99.00_percentile_latency_ns": "latency_p99_ns"}


#: Units of the accuracy values SUTs report (reference scripts: ROUGE in percent,
#: gen_len in characters); anything else is a plain score.
ACCURACY_UNITS = {"top1": "ratio", "top5": "ratio", "rouge1": "%", "rouge2": "%", "rougeL": "%",
                  "rougeLsum": "%", "gen_len": "characters", "gen_num": "samples",
                  "samples": "samples", "tokens_per_sample": "tokens", "exact_match": "%"}


def accuracy_metrics(accuracy: dict[str, float]) -> dict[str, Metric]:
    return {f"accuracy_{name}": Metric(value, ACCURACY_UNITS.get(name, "score"), True)
            for name, value in accuracy.items()}


def accuracy_reasons(log: DetailLog, spec: LoadgenSpec, report: dict[str, Any]) -> list[str]:
    """AccuracyOnly runs have no LoadGen verdict: they are valid when every QSL sample was
    logged and answered, and the accuracy meets the target where the harness knows one."""
    accuracy = report.get("accuracy")
    if accuracy is None:
        return ["accuracy was not computed (accuracy: false)"] if spec.mode == "AccuracyOnly" else []
    reasons = counted(log.errors)
    total = report.get("total_sample_count")
    answered = accuracy.get("samples", accuracy.get("gen_num"))
    if answered is not None and total is not None and int(answered) < int(total):
        reasons.append(f"accuracy log holds {int(answered)} of {total} samples")
    target = cfg.ACCURACY_TARGETS.get(cfg.conf_model_key(spec.model_name))
    if target and target[0] in accuracy and accuracy[target[0]] < target[1]:
        reasons.append(f"accuracy {target[0]} {accuracy[target[0]]:.4f} is below the target {target[1]:.4f}")
    return reasons


def invalid_reasons(log: DetailLog) -> list[str]:
    """LoadGen's reasons, verbatim: failed checks, recommendations, early-stopping text, errors."""
    if log.get("result_validity") == "VALID":
        return []
    reasons = [text for key, text in _FLAGS if log.get(key) is False]
    for key in ("result_invalid_reason", "early_stopping_result", "early_stopping_ttft_result",
                "early_stopping_tpot_result"):
        text = " ".join(str(log.get(key) or "").split())
        if text and (key == "result_invalid_reason" or "unsuccessful" in text.lower()):
            reasons.append(text)
    reasons.extend(counted(log.errors))
    return reasons or [f"LoadGen result_validity: {log.get('result_validity')}"]


def counted(lines: tuple[str, ...] | list[str]) -> list[str]:
    """Each distinct line once, in order of first appearance, with its count when repeated
    (LoadGen logs one ``error_runtime`` per failed sample)."""
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return [line if n == 1 else f"{line} (logged {n} times)" for line, n in counts.items()]


def submission_blockers(log: DetailLog, spec: LoadgenSpec, accuracy: dict[str, float] | None,
                        report: dict[str, Any] | None = None) -> list[str]:
    """The official rules (workloads.md §1.7) this run does not meet, including, for LLM
    benchmarks, missed accuracy targets (:func:`targets.accuracy_blockers`) and weights or a
    dataset that are not the reference ones (:func:`identity_blockers`)."""
    model = cfg.conf_model_key(spec.model_name)
    scenario = spec.scenario
    out: list[str] = []
    if model not in cfg.KNOWN_MODELS:
        out.append(f"model {spec.model_name!r} is not an MLPerf Inference benchmark")
    if spec.mode != "AccuracyOnly" and log.get("result_validity") != "VALID":
        out.append(f"LoadGen verdict is {log.get('result_validity')}, not VALID")
    if spec.mode == "FindPeakPerformance":
        out.append("FindPeakPerformance is an exploration mode, not a submission run")
    duration = log.get("effective_min_duration_ms")
    if spec.mode == "AccuracyOnly":
        duration = None  # an accuracy run covers the whole dataset; duration does not apply
    if isinstance(duration, (int, float)) and duration < cfg.OFFICIAL_MIN_DURATION_MS:
        out.append(f"min_duration {duration} ms is below the {cfg.OFFICIAL_MIN_DURATION_MS} ms the rules require")
    if spec.mode != "AccuracyOnly":
        out.extend(_count_blockers(log, model, scenario))
    for name, official in cfg.OFFICIAL_SEEDS.items():
        if log.get(f"effective_{name}") != official:
            out.append(f"{name} {log.get(f'effective_{name}')} is not the official seed {official}")
    out.extend(_latency_blockers(log, model, scenario))
    if accuracy is not None:
        out.extend(targets.accuracy_blockers(model, accuracy))
    out.extend(identity_blockers(model, report or {}))
    if accuracy and model in cfg.ACCURACY_TARGETS:
        metric, minimum = cfg.ACCURACY_TARGETS[model]
        if metric in accuracy and accuracy[metric] < minimum:
            out.append(f"accuracy {metric} {accuracy[metric]:.4f} is below the target {minimum:.4f}")
    return out


def identity_blockers(model: str, report: dict[str, Any]) -> list[str]:
    """The model- and dataset-identity blockers of an LLM benchmark, from what the child
    recorded: the SUT's ``model_info`` (name, source, number_of_parameters, sha256), its
    model name, its ``dataset_info`` (name) and the QSL size."""
    raw = report.get("model_info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    names = [str(v) for v in (info.get("name"), info.get("source"), report.get("model")) if v]
    digest = info.get("sha256") or info.get("digest")
    dataset = report.get("dataset_info") if isinstance(report.get("dataset_info"), dict) else None
    return targets.identity_blockers(model, names, info.get("number_of_parameters"), digest, dataset,
                                     report.get("total_sample_count"))


def identity(model: str, report: dict[str, Any]) -> dict[str, Any]:
    """The model's and the dataset's identity for the result (docs/models.md): each verdict
    (``reference`` only by digest, ``named-like-reference`` by name alone, ``other``) with
    the digest it rests on."""
    raw = report.get("model_info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    names = [str(v) for v in (info.get("name"), info.get("source"), report.get("model")) if v]
    dataset = report.get("dataset_info") if isinstance(report.get("dataset_info"), dict) else None
    return {"model": targets.model_identity(model, names, info.get("sha256") or info.get("digest")),
            "dataset": targets.dataset_identity(model, dataset)}


def _count_blockers(log: DetailLog, model: str, scenario: str) -> list[str]:
    out: list[str] = []
    if scenario == "Offline":
        needed = cfg.OFFLINE_MIN_SAMPLES.get(model)
        issued = log.get("effective_samples_per_query")
        if needed and isinstance(issued, int) and issued < needed:
            out.append(f"Offline issued {issued} samples; the rules require at least {needed}")
    elif log.get("early_stopping_met") is False:
        out.append(f"early stopping not met ({cfg.CHECKER_MIN_QUERIES[scenario]} queries is the checker's floor)")
    official = cfg.PERFORMANCE_SAMPLE_COUNT.get(model)
    used = log.get("effective_performance_sample_count")
    if official and isinstance(used, int) and used != official:
        out.append(f"performance_sample_count {used} differs from the official {official}")
    return out


def _latency_blockers(log: DetailLog, model: str, scenario: str) -> list[str]:
    if scenario != "Server":
        return []
    out: list[str] = []
    official_ms = cfg.SERVER_TARGET_LATENCY_MS.get(model)
    used = log.get("effective_target_latency_ns")
    if official_ms is not None and isinstance(used, int) and used != official_ms * 1_000_000:
        out.append(f"Server target latency {used} ns differs from the official {official_ms} ms")
    limits = cfg.SERVER_TOKEN_LIMITS_MS.get(model)
    if limits:
        # every limits entry is a (TTFT, TPOT) pair
        for key, official in zip(("requested_server_ttft_latency", "requested_server_tpot_latency"), limits,
                                 strict=True):
            value = log.get(key)
            if isinstance(value, int) and value != official * 1_000_000:
                out.append(f"{key.split('_')[2].upper()} limit {value} ns differs from the official {official} ms")
    return out


def summary_result(metrics: dict[str, Metric], scenario: str, tokens: bool,
                   primary: str | None = None, model: str = "") -> dict[str, Any]:
    """What the checker's summary.csv would show: ``Result``, ``Units`` and the detail-log
    key the checker reads (``metric_key``)."""
    key = targets.result_field(model, scenario)
    if "latency_p50_ns" not in metrics:  # an accuracy run
        return {"result": None, "units": "Tokens/s" if tokens else UNITS[scenario], "metric_key": key}
    if tokens and scenario in ("Offline", "Server"):
        return {"result": metrics["tokens_per_second"].value, "units": "Tokens/s", "metric_key": key}
    if scenario in ("SingleStream", "MultiStream"):
        value = metrics[primary or "early_stopping_latency_ns"].value
        return {"result": None if value is None else value / 1e6, "units": UNITS[scenario],
                "metric_key": key}
    primary = "samples_per_second" if scenario == "Offline" else "completed_samples_per_second"
    return {"result": metrics[primary].value, "units": UNITS[scenario], "metric_key": key}


def effective(log: DetailLog) -> dict[str, Any]:
    out = {key: log.get(f"effective_{key}") for key in _EFFECTIVE}
    out["ttft_latency_ns"] = log.get("requested_server_ttft_latency")
    out["tpot_latency_ns"] = log.get("requested_server_tpot_latency")
    out["use_token_latencies"] = uses_tokens(log)
    return out


def build_part(log: DetailLog, spec: LoadgenSpec, report: dict[str, Any], log_dir: str) -> ResultPart:
    """The step's :class:`ResultPart` from the parsed log and the child's report."""
    accuracy = report.get("accuracy")
    primary: str | None
    model = cfg.conf_model_key(spec.model_name)
    metrics, primary = performance_metrics(log, spec.scenario, model)
    if spec.mode == "AccuracyOnly":  # no timing: LoadGen logs no performance results
        metrics, primary = {}, None
    summary = summary_result(metrics, spec.scenario, uses_tokens(log), primary, model)
    if accuracy is not None:
        acc_metrics = accuracy_metrics(accuracy)
        metrics.update(acc_metrics)
        if primary is None and acc_metrics:
            named = [k for k in acc_metrics if k not in ("accuracy_samples", "accuracy_gen_num")] or list(acc_metrics)
            primary = named[0]
    tokens = uses_tokens(log)
    validity = log.get("result_validity")
    status: Literal["valid", "invalid", "error"]
    if spec.mode == "AccuracyOnly":
        reasons = accuracy_reasons(log, spec, report)
        status = "invalid" if reasons else "valid"
    else:
        reasons = invalid_reasons(log)
        status = "valid" if validity == "VALID" else "invalid"
    errors = [f"sut {spec.sut}: {line}" for line in report.get("sut_errors") or ()]
    if errors:
        loadgen_invalid = spec.mode != "AccuracyOnly" and validity == "INVALID"
        status = "invalid" if loadgen_invalid else "error"
        reasons = [*reasons, *errors]
        _null_token_latencies(metrics)
    mlperf = {
        "result_validity": validity,
        "min_duration_met": log.get("result_min_duration_met"),
        "min_queries_met": log.get("result_min_queries_met"),
        "early_stopping_met": log.get("early_stopping_met"),
        "perf_constraints_met": log.get("result_perf_constraints_met"),
        "effective": effective(log),
        "latency_ns": log.latency_ns(),
        "query_count": log.get("result_query_count"),
        "loadgen_version": log.get("loadgen_version"),
        "log_dir": log_dir,
        "model_name": cfg.conf_model_key(spec.model_name),
        "sut": spec.sut,
        "sut_name": report.get("sut_name"),
        "submission_blockers": submission_blockers(log, spec, accuracy, report),
        "accuracy_targets": None if accuracy is None else targets.check_accuracy(model, accuracy),
        "summary": summary,
        "calibration": report.get("calibration"),
        "derived_settings": report.get("derived"),
        "identity": identity(model, report),
        "accuracy": accuracy,
        "warnings": list(log.warnings),
        "errors": list(log.errors),
    }
    mlperf["sut_errors"] = list(report.get("sut_errors") or ())
    mlperf["failed_samples"] = report.get("failed_samples")
    if errors:
        mlperf["submission_blockers"].append("the SUT reported failed samples")
    if tokens:
        mlperf["ttft_ns"] = _nulled(log.ttft_ns()) if errors else log.ttft_ns()
        mlperf["tpot_ns"] = _nulled(log.tpot_ns()) if errors else log.tpot_ns()
    _apply_sut_extra(report.get("sut_extra") or {}, metrics, mlperf)
    mlperf["mlperf_name"] = cfg.conf_model_key(spec.model_name)  # MLPerf's own name lives in its section
    benchmark = {
        "suite": "mlperf-inference",
        "suite_version": "v6.1",
        "task": report.get("model", spec.model_name),
        "scenario": spec.scenario,
        "mode": spec.mode,
        "division": "unofficial",
        "primary_metric": primary,
    }
    return ResultPart(
        status=status,
        benchmark=benchmark,
        metrics=metrics,
        invalid_reasons=tuple(reasons),
        sections={"mlperf": mlperf, **_extra_sections(report, spec, metrics)},
    )


def _apply_sut_extra(extra: dict[str, Any], metrics: dict[str, Metric], mlperf: dict[str, Any]) -> None:
    """Merge what the SUT measured beyond LoadGen (``child.sut_extra``): its metrics (a key
    LoadGen already filled is never replaced), its ``mlperf`` keys and its warnings."""
    for name, raw in (extra.get("metrics") or {}).items():
        if name not in metrics and isinstance(raw, dict):
            metrics[name] = _metric(raw.get("value"), str(raw.get("unit") or "score"),
                                    bool(raw.get("higher_is_better", False)))
    for key, value in (extra.get("mlperf") or {}).items():
        mlperf.setdefault(key, value)
    mlperf["warnings"].extend(str(w) for w in extra.get("warnings") or ())


def _null_token_latencies(metrics: dict[str, Metric]) -> None:
    """TTFT/TPOT metrics keep their keys with value null (measured but not trustworthy)."""
    for name, metric in metrics.items():
        if name.startswith(("ttft_", "tpot_")):
            metrics[name] = Metric(None, metric.unit, metric.higher_is_better)


def _nulled(summary: dict[str, Any]) -> dict[str, Any]:
    return dict.fromkeys(summary)


def _extra_sections(report: dict[str, Any], spec: LoadgenSpec, metrics: dict[str, Metric]) -> dict[str, Any]:
    out: dict[str, Any] = {"cost": _cost(report, spec, metrics)}
    if isinstance(report.get("model_info"), dict):
        out["model"] = report["model_info"]
    if isinstance(report.get("software"), dict):
        software = report["software"]
        packages = (report.get("sut_extra") or {}).get("packages")
        if isinstance(packages, dict):  # e.g. the serving engine's version, as the server reports it
            software = {**software, "packages": {**software.get("packages", {}), **packages}}
        out["software"] = software
    return out


def _cost(report: dict[str, Any], spec: LoadgenSpec, metrics: dict[str, Metric]) -> dict[str, Any]:
    """The ``cost`` section (energy from the child's ``energy`` report, price from the spec);
    its measured values join ``metrics`` (:func:`cmx_mlperf.power.cost.cost_section`)."""
    section, added = cost_section(report.get("energy"), spec.price_per_hour, metrics)
    for name, metric in added.items():
        metrics.setdefault(name, metric)
    return section
