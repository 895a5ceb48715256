"""The ``train.run`` step: check the configuration, launch the ranks, and turn what they
measured into typed metrics and the ``train`` result section."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from cmx_core.api import Artifact, Metric, ResultPart, StepContext, StepOutput, UsageError
from cmx_train import __version__
from cmx_train.compliance import record as compliance_record
from cmx_train.compliance import refusal as compliance_refusal
from cmx_train.config import TrainConfig, parse
from cmx_train.launch import run
from cmx_train.maxbatch import search
from cmx_train.mlperf_log import BENCHMARK, MLPERF_LOG
from cmx_train.scaling import Baseline, Efficiency, Point, baseline_from_sweep, efficiency
from cmx_train.threads import ThreadChoice, choose, cores
from cmx_train.user_script import script_record

SUITE = "train"
MODE_NAME = {"throughput": "throughput", "time-to-accuracy": "time_to_accuracy", "max-batch": "max_batch"}


def run_step(ctx: StepContext) -> StepOutput:
    config = parse(ctx.params)
    if config.checkpoint_every:
        if ctx.checkpoint_dir is None:
            raise UsageError(f"{ctx.recipe}: checkpoint_every needs the step's checkpoint: true")
        config = replace(config, checkpoint_dir=str(ctx.checkpoint_dir))
    threads = choose(config, ctx.run_dir, os.environ)  # once for the sweep: every point the same
    config = replace(config, threads_per_rank=threads.per_rank)
    work = ctx.work_dir / "train"
    log = ctx.log_dir / "train-launch.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if config.mode == "max-batch":
        found = search(config, work, log, ctx.launchers)
        return _max_batch_output(config, found, work)

    ranks = run(config, work, log, ctx.launchers, ctx.metrics.metrics_file)
    return _output(ctx, config, ranks, work, threads)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation, numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _step_times(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """A global step lasts as long as its slowest rank."""
    counts = [len(r["step_times_s"]) for r in rows]
    if not counts:
        return []
    return [max(r["step_times_s"][i] for r in rows) for i in range(min(counts))]


def honesty(config: TrainConfig) -> list[str]:
    """Why this run is not an MLPerf Training result (every run here is ``unofficial``)."""
    if config.script:
        return [f"your own script {Path(config.script).name}: not an MLPerf Training benchmark"]
    reasons = []
    if config.model == "digits-cnn":
        reasons.append("digits-cnn on scikit-learn's digits is not an MLPerf Training benchmark")
    else:
        reasons.append(f"{config.model} trains on generated data, not the reference data set")
    if config.mode == "time-to-accuracy" and config.model != "digits-cnn":
        reasons.append("the target accuracy is not the reference one")
    if not config.weights:
        reasons.append("weights initialised at random (seeded)")
    return reasons


def step_time_cv(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The coefficient of variation of the global step times (None below two steps)."""
    times = _step_times(rows)
    if len(times) < 2 or statistics.fmean(times) <= 0:
        return None
    return statistics.stdev(times) / statistics.fmean(times)


def threads_record(choice: ThreadChoice, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Ranks, threads per rank and total threads as the ranks read them back from torch;
    ``per_rank`` is null where the ranks disagree (each rank's own is in ``ranks``)."""
    used = [r.get("threads") for r in rows]
    known = [u for u in used if isinstance(u, int) and u > 0]
    same = len(known) == len(used) and len(set(known)) == 1
    return {"ranks": len(rows), "per_rank": known[0] if same else None,
            "total": sum(known) if len(known) == len(used) else None, "requested_per_rank": choice.per_rank,
            "chosen_by": choice.chosen_by, "cores": cores(),
            "omp_num_threads": rows[0].get("omp_num_threads") if rows else None,
            "interop_threads": rows[0].get("interop_threads") if rows else None}


def _metrics(config: TrainConfig, rows: Sequence[Mapping[str, Any]]) -> dict[str, Metric]:
    window = max(r["window_s"] for r in rows)
    total = sum(r["samples"] for r in rows)
    sps = total / window if window > 0 else None
    times = _step_times(rows)
    p50, p99 = percentile(times, 50), percentile(times, 99)
    metrics = {
        "samples_per_second": Metric(sps, "samples/s", True),
        "step_time_p50_ms": Metric(None if p50 is None else p50 * 1e3, "ms", False),
        "step_time_p99_ms": Metric(None if p99 is None else p99 * 1e3, "ms", False),
        "peak_memory_bytes": Metric(max(r["peak_memory_bytes"] for r in rows), "bytes", False),
        "final_loss": Metric(rows[0]["losses"][-1] if rows[0]["losses"] else None, "1", False),
    }
    for r in rows:
        rank_sps = r["samples"] / r["window_s"] if r["window_s"] > 0 else None
        metrics[f"samples_per_second_rank{r['rank']}"] = Metric(rank_sps, "samples/s", True)
        metrics[f"peak_memory_bytes_rank{r['rank']}"] = Metric(r["peak_memory_bytes"], "bytes", False)
    if config.mode == "throughput":
        metrics["samples_per_joule"] = Metric(_per_joule(rows, total), "samples/J", True)
    if config.mode == "time-to-accuracy":
        first = rows[0]
        metrics["val_accuracy"] = Metric(first["val_accuracy"][-1] if first["val_accuracy"] else None, "ratio", True)
        metrics["time_to_accuracy_s"] = Metric(first["time_to_target_s"], "s", False)
        metrics["epochs_to_accuracy"] = Metric(first["epochs_to_target"], "epochs", False)
    return metrics


def _per_joule(rows: Sequence[Mapping[str, Any]], samples: int) -> float | None:
    """Samples per joule over the nodes' energy (each node's local rank 0 read it); None
    where any node could not read one."""
    readers = [r for r in rows if r.get("energy_source")]
    if not readers or any(r.get("energy_j") is None for r in readers):
        return None
    joules = sum(float(r["energy_j"]) for r in readers)
    return samples / joules if joules > 0 else None


def _model_info(config: TrainConfig) -> dict[str, Any]:
    weights = "path" if config.weights else "random"
    sha = hashlib.sha256(Path(config.weights).read_bytes()).hexdigest() if config.weights else None
    return {"name": config.model, "weights": weights, "weights_path": config.weights or None, "weights_sha256": sha}


def _point(config: TrainConfig, rows: Sequence[Mapping[str, Any]], sps: float | None,
           threads: Mapping[str, Any]) -> Point | None:
    if not sps:
        return None
    return Point(sps, config.world_size, threads["per_rank"], threads["total"], threads["cores"], step_time_cv(rows))


def _output(ctx: StepContext, config: TrainConfig, ranks: Any, work: Path, threads: ThreadChoice) -> StepOutput:
    rows = sorted(ranks.rows, key=lambda r: r["rank"])
    found = _baseline(ctx, config)
    metrics = _metrics(config, rows)
    record = threads_record(threads, rows)
    point = _point(config, rows, metrics["samples_per_second"].value, record)
    if found is None and point is not None and config.mode == "throughput" and config.world_size == 1:
        found = Baseline(point, "this run (1 process)")  # the 1-process point is its own baseline
    judged = efficiency(config.scaling, point, found) if config.mode == "throughput" else None
    if judged is not None:
        metrics["scaling_efficiency"] = Metric(judged.value, "ratio", True)
    warning = judged.warning() if judged is not None else None
    if warning:
        print(f"cmx-train: warning: {warning}", file=sys.stderr)
    status: Literal["valid", "invalid"] = "valid"
    reasons: list[str] = []
    converged = None
    artifacts = [Artifact(work / "ranks.json", "train_ranks"), Artifact(work / "config.json", "train_config")]
    compliance = None
    if config.mode == "time-to-accuracy":
        converged = rows[0]["time_to_target_s"] is not None
        if not converged:
            status = "invalid"
            reasons.append(f"did not reach target_accuracy {config.target_accuracy} in {config.max_epochs} epochs")
        mllog = work / MLPERF_LOG
        if mllog.is_file():
            compliance = compliance_record(mllog, BENCHMARK[config.model], config.target_accuracy)
            artifacts.append(Artifact(mllog, "mlperf_log"))
            refused = compliance_refusal(compliance)
            if refused and converged:
                status = "invalid"
                reasons.append(refused)
    section = _section(config, rows, ranks, _Judged(found, converged, compliance, judged, record))
    (work / "section.json").write_text(json.dumps(section, indent=1), encoding="utf-8")
    part = ResultPart(status=status, benchmark=_benchmark(config, metrics), metrics=metrics,
                      invalid_reasons=tuple(reasons), sections={SUITE: section}, notes=warning or "")
    outputs = {"samples_per_second": metrics["samples_per_second"].value, "world_size": config.world_size,
               "converged": converged, "status": status, "work_dir": str(work)}
    return StepOutput(outputs=outputs, result=part, artifacts=tuple(artifacts))


def _benchmark(config: TrainConfig, metrics: Mapping[str, Metric]) -> dict[str, Any]:
    primary = {"throughput": "samples_per_second", "time-to-accuracy": "time_to_accuracy_s",
               "max-batch": "max_batch_size"}[config.mode]
    task = Path(config.script).stem if config.script else config.model
    return {"suite": SUITE, "suite_version": __version__, "task": task, "scenario": config.precision,
            "mode": MODE_NAME[config.mode], "division": "unofficial", "primary_metric": primary}


def _baseline(ctx: StepContext, config: TrainConfig) -> Baseline | None:
    if config.baseline_samples_per_s > 0:
        return Baseline(Point(config.baseline_samples_per_s, 1), "input baseline_samples_per_s", measured=False)
    return baseline_from_sweep(ctx.run_dir, config)


@dataclass(frozen=True)
class _Judged:
    """What the step concluded about a run, beside the ranks' rows: its scaling baseline and
    where it came from, whether it converged, the compliance checker's verdict, the scaling
    efficiency with its suspicion, and the threads the ranks used."""

    baseline: Baseline | None
    converged: bool | None
    compliance: Any
    efficiency: Efficiency | None
    threads: Mapping[str, Any]


def _section(config: TrainConfig, rows: Sequence[Mapping[str, Any]], ranks: Any, judged: _Judged) -> dict[str, Any]:
    return {
        "mode": config.mode,
        "model": _model_info(config),
        "data": "sklearn-digits" if config.model == "digits-cnn" else "generated",
        "precision": config.precision,
        "device": config.device,
        "backend": config.backend,
        "launcher": ranks.launch.launcher,
        "rendezvous": ranks.launch.rendezvous,
        "nproc": config.nproc,
        "nodes": config.nodes,
        "world_size": config.world_size,
        "global_batch_size": config.global_batch_size,
        "per_rank_batch_size": config.per_rank_batch,
        "seed": config.seed,
        "lr": config.lr,
        "steps": config.steps if config.mode == "throughput" else None,
        "warmup_steps": config.warmup_steps if config.mode == "throughput" else None,
        "target_accuracy": config.target_accuracy if config.mode == "time-to-accuracy" else None,
        "converged": judged.converged,
        "epochs": rows[0]["epochs"],
        "val_accuracy": list(rows[0]["val_accuracy"]),
        "losses": list(rows[0]["losses"]),
        "scaling": config.scaling,
        "threads": dict(judged.threads),
        "step_time_cv": step_time_cv(rows),
        "efficiency": judged.efficiency.to_json() if judged.efficiency is not None else None,
        "baseline_samples_per_s": judged.baseline.point.samples_per_s if judged.baseline else None,
        "baseline_from": judged.baseline.source if judged.baseline else None,
        "baseline_threads_per_rank": judged.baseline.point.threads_per_rank if judged.baseline else None,
        "compliance": judged.compliance,
        "script": script_record(config.script, list(config.script_argv)) if config.script else None,
        "unofficial_reasons": honesty(config),
        "checkpoint_every": config.checkpoint_every,
        "resumed_from_step": max((int(r.get("resumed_from_step") or 0) for r in rows), default=0),
        "restarts": max((int(r.get("restarts") or 0) for r in rows), default=0),
        "launch_wall_s": ranks.wall_s,
        "ranks": [{"rank": r["rank"], "host": r["host"], "samples": r["samples"], "window_s": r["window_s"],
                   "samples_per_second": r["samples"] / r["window_s"] if r["window_s"] > 0 else None,
                   "peak_memory_bytes": r["peak_memory_bytes"], "energy_j": r.get("energy_j"),
                   "energy_source": r.get("energy_source") or None, "threads": r.get("threads")} for r in rows],
    }


def _max_batch_output(config: TrainConfig, found: Any, work: Path) -> StepOutput:
    metrics = {"max_batch_size": Metric(found.largest, "samples", True),
               "max_batch_size_per_rank": Metric(found.largest_per_rank, "samples", True),
               "peak_memory_bytes": Metric(found.peak_memory_bytes, "bytes", False)}
    status: Literal["valid", "invalid"] = "valid" if found.largest is not None else "invalid"
    reasons = () if found.largest is not None else (f"no batch size fits: {found.first_oom_message}",)
    section = {"mode": config.mode, "model": _model_info(config),
               "data": "sklearn-digits" if config.model == "digits-cnn" else "generated",
               "precision": config.precision, "device": config.device, "backend": config.backend,
               "launcher": config.launcher, "nproc": config.nproc, "nodes": config.nodes,
               "world_size": config.world_size, "seed": config.seed, "memory_limit_mb": config.memory_limit_mb,
               "threads_per_rank": config.threads_per_rank,
               "max_batch": config.max_batch, "oom_seen": found.first_oom is not None,
               "first_oom_batch_size": found.first_oom, "oom_message": found.first_oom_message,
               "capped": found.capped, "probes": found.probes, "unofficial_reasons": honesty(config)}
    (work / "section.json").write_text(json.dumps(section, indent=1), encoding="utf-8")
    part = ResultPart(status=status, benchmark=_benchmark(config, metrics), metrics=metrics,
                      invalid_reasons=reasons, sections={SUITE: section})
    return StepOutput(outputs={"max_batch_size": found.largest, "oom_seen": found.first_oom is not None,
                               "status": status, "work_dir": str(work)}, result=part)
