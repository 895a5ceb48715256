"""cmx hook implementations of cmx-mlperf: the ``mlperf.loadgen`` step, the
``mlperf-inference`` suite with the schema of its ``mlperf`` result section, the
``mlperf-submission`` and ``summary-csv`` exporters and the plugin's recipes.

Importing this module costs next to nothing: the harness and exporters are imported only
when a step runs or an export is requested.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import Exporter, StepContext, StepOutput, StepType, Suite, hookimpl, register_template_function
from cmx_mlperf.sut import sut_extras

SECTION_SCHEMA = Path(__file__).parent / "schemas" / "mlperf.schema.json"

STEP_PARAMS: dict[str, str] = {
    "sut": "SUT kind: noop, classifier, hf-llm, openai-http",
    "sut_params": "mapping passed to the SUT factory (model_path, dataset_dir, ...)",
    "scenario": "Offline, Server, SingleStream or MultiStream",
    "mode": ("PerformanceOnly, AccuracyOnly, FindPeakPerformance or PeakQPS "
             "(the highest Server QPS that is VALID, then a curve)"),
    "model_name": "MLPerf model key for the embedded mlperf.conf (e.g. resnet50, llama3.1-8b)",
    "target_qps": "Server target QPS (and Offline expected QPS when expected_qps is unset)",
    "target_latency_ms": "Server target latency in ms",
    "duration_s": "LoadGen min_duration in seconds",
    "min_query_count": "LoadGen min_query_count",
    "max_query_count": "LoadGen max_query_count (0: no limit)",
    "expected_qps": "Offline expected QPS (LoadGen issues expected_qps x duration x 1.1 samples)",
    "expected_latency_ms": "SingleStream/MultiStream expected latency in ms",
    "ttft_ms": "token runs: TTFT latency limit in ms",
    "tpot_ms": "token runs: TPOT latency limit in ms",
    "accuracy": "compute accuracy from mlperf_log_accuracy.json (AccuracyOnly mode)",
    "performance_sample_count": "override of the performance sample count",
    "samples_per_query": "MultiStream samples per query",
    "timeout_s": "wall-clock limit of the LoadGen child process in seconds",
    "price_per_hour": "USD per hour of the system under test: the result reports cost per million tokens",
    "power_sample_ms": "power sampling period in ms during the LoadGen test (default 100; 0: off)",
    "search_runs": "PeakQPS: LoadGen tests the search may run at most",
    "sweep_points": "PeakQPS: points of the tokens/s-versus-latency curve, up to 1.2 x the peak",
    "derived": ("settings the recipe derived, with their inputs (vLLM's tensor/data parallelism): "
                "shown by cmx plan, not read by the step"),
}


def _vllm_split(devices: Any, inputs: Mapping[str, Any]) -> Any:
    """Template function ``mlperf_vllm_split(facts.gpus.devices, inputs)``: vLLM's TP/DP and
    request concurrency (:func:`cmx_mlperf.llm.vllm_plan.derive_for_recipe`)."""
    from cmx_mlperf.llm.vllm_plan import derive_for_recipe  # deferred: start-up: only a recipe that calls it

    return derive_for_recipe(devices, inputs)


register_template_function("mlperf_vllm_split", _vllm_split)


def _run_loadgen(ctx: StepContext) -> StepOutput:
    from cmx_mlperf.harness.step import run_step  # deferred: start-up: 30 modules not needed to start cmx

    return run_step(ctx)


def _lazy_export(module: str) -> Callable[[list[Mapping[str, Any]], list[Path], Path], None]:
    def export(docs: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
        importlib.import_module(module).export(docs, run_dirs, dest)

    return export


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(
        StepType(
            name="mlperf.loadgen",
            summary="Run one MLPerf LoadGen test in a fresh subprocess and parse its logs",
            run=_run_loadgen,
            params=STEP_PARAMS,
            measures=True,
            extras_for=sut_extras,
        )
    )


@hookimpl
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    register(
        Suite(
            name="mlperf-inference",
            summary="MLPerf Inference through LoadGen (Offline, Server, SingleStream, MultiStream)",
            section="mlperf",
            schema=json.loads(SECTION_SCHEMA.read_text(encoding="utf-8")),
            required_for=("valid", "invalid"),
        )
    )


@hookimpl
def cmx_register_exporters(register: Callable[[Exporter], None]) -> None:
    register(
        Exporter(
            name="mlperf-submission",
            summary="MLPerf Inference submission tree (systems/, results/, measurements.json)",
            export=_lazy_export("cmx_mlperf.export.submission"),
        )
    )
    register(
        Exporter(
            name="summary-csv",
            summary="MLPerf submission checker summary.csv rows",
            export=_lazy_export("cmx_mlperf.export.summary_csv"),
        )
    )


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
