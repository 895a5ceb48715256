"""The child process: ``python -m cmx_mlperf.harness.child SPEC.json``.

Runs exactly one LoadGen test, because the embedded ``mlperf.conf`` is applied only by the
first ``TestSettings.FromConfig`` of a process (workloads.md §1.3 item 1). Its working
directory is the clean log directory the parent created (so no stray ``audit.config`` is
picked up). It writes, next to the spec: ``user.conf``, LoadGen's logs, ``child_report.json``
(its ``energy`` key: :mod:`cmx_mlperf.power.energy`), ``power_series.csv`` where a power
source exists and, in AccuracyOnly mode, ``accuracy.txt``. A user-facing failure is written
as one line to ``child_error.txt`` (exit status 3).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from cmx_core.api import Meter
from cmx_core.errors import CmxError, StepFailed
from cmx_mlperf.harness import accuracy as acc
from cmx_mlperf.harness import live
from cmx_mlperf.harness.calibrate import CalibrationSpec, budget_for, calibrate, derive
from cmx_mlperf.harness.completer import LoadgenCompleter
from cmx_mlperf.harness.config import Derived, conf_model_key, needs_calibration, user_conf
from cmx_mlperf.harness.live import LiveReport
from cmx_mlperf.harness.spec import LoadgenSpec
from cmx_mlperf.sut import make_sut

REPORT = "child_report.json"
ERROR = "child_error.txt"
EXIT_USER_ERROR = 3
CALIBRATION_TIMEOUT_S = 600.0


def _settings(lg: Any, spec: LoadgenSpec, conf_path: Path, derived: Derived, sut: Any) -> Any:
    settings = lg.TestSettings()
    code = settings.FromConfig(str(conf_path), conf_model_key(spec.model_name), spec.scenario, 1)
    if code != 0:
        raise StepFailed(f"{conf_path}: LoadGen refused the configuration (code {code})")
    settings.scenario = getattr(lg.TestScenario, spec.scenario)
    settings.mode = getattr(lg.TestMode, spec.mode)
    _exact_latencies(settings, spec, derived)
    settings.use_token_latencies = bool(sut.uses_tokens)
    total = int(sut.total_sample_count)
    if settings.performance_sample_count_override > total:
        settings.performance_sample_count_override = total  # dataset smaller than the rule
    return settings


def _exact_latencies(settings: Any, spec: LoadgenSpec, derived: Derived) -> None:
    """user.conf keeps whole milliseconds for some keys; set the exact values here."""
    if spec.scenario == "Server" and spec.target_latency_ms is not None:
        settings.server_target_latency_ns = round(spec.target_latency_ms * 1e6)
    expected = spec.expected_latency_ms or derived.expected_latency_ms
    if expected is not None and spec.scenario == "SingleStream":
        settings.single_stream_expected_latency_ns = round(expected * 1e6)
    if expected is not None and spec.scenario == "MultiStream":
        settings.multi_stream_expected_latency_ns = round(expected * 1e6)
    if spec.ttft_ms is not None:
        settings.ttft_latency = round(spec.ttft_ms * 1e6)
    if spec.tpot_ms is not None:
        settings.tpot_latency = round(spec.tpot_ms * 1e6)


def _log_settings(lg: Any, out_dir: Path) -> Any:
    log = lg.LogSettings()
    log.log_output.outdir = str(out_dir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    return log


def run_test(spec: LoadgenSpec, out_dir: Path) -> dict[str, Any]:
    """Create the SUT, calibrate if needed, run LoadGen, compute accuracy; return the report."""
    import mlperf_loadgen as lg  # deferred: mlperf_loadgen only when this runs (1 module)


    sut = make_sut(spec.sut, spec.sut_params)
    completer = LoadgenCompleter()
    report: dict[str, Any] = {"sut_name": sut.name, "total_sample_count": sut.total_sample_count}
    began = time.perf_counter()
    sut.start(completer)
    report["sut_start_s"] = round(time.perf_counter() - began, 6)
    try:
        derived = Derived()
        if needs_calibration(spec):
            per_query = (spec.samples_per_query or 8) if spec.scenario == "MultiStream" else 1
            measure = CalibrationSpec(spec.scenario, per_query, budget_for(spec.duration_s), CALIBRATION_TIMEOUT_S,
                                      spec.mode)
            calibration = calibrate(sut, completer, measure)
            derived = derive(calibration, spec.duration_s)
            report["calibration"] = calibration.as_dict()
            report["derived"] = {k: v for k, v in derived.__dict__.items() if v is not None}
        conf_path = out_dir / "user.conf"
        conf_path.write_text(user_conf(spec, derived))
        settings = _settings(lg, spec, conf_path, derived, sut)
        report["performance_sample_count"] = int(settings.performance_sample_count_override)
        qsl = lg.ConstructQSL(sut.total_sample_count, settings.performance_sample_count_override
                              or sut.performance_sample_count, sut.load_samples, sut.unload_samples)
        handle = lg.ConstructFastSUT(sut.issue, sut.flush)
        log_settings = _log_settings(lg, out_dir)
        meter = Meter.open(spec.power_sample_ms)  # opens NVML / amd-smi / RAPL before the test
        gc.collect()
        gc.freeze()  # setup objects (modules, model) leave the GC's scans during the test
        meter.start()
        began = time.perf_counter()
        try:
            with LiveReport(completer, live.metrics_file()):  # the test's progress, each second
                lg.StartTestWithLogSettings(handle, qsl, settings, log_settings)
            report["loadgen_wall_s"] = round(time.perf_counter() - began, 6)
        finally:
            report["energy"] = meter.stop(out_dir)  # joules over the test; power_series.csv
        gc.unfreeze()
        lg.DestroyQSL(qsl)
        lg.DestroyFastSUT(handle)
        if spec.wants_accuracy:
            entries = acc.read_entries(out_dir / acc.ACCURACY_LOG)
            metrics = {k: float(v) for k, v in sut.accuracy(entries).items()}
            acc.write_accuracy_txt(out_dir, metrics, len(entries))
            report["accuracy"] = metrics
    finally:
        sut.stop()
    report.update(sut_errors(sut))
    report.update(_describe(sut))
    report.update(sut_extra(sut))
    return report


def sut_extra(sut: Any) -> dict[str, Any]:
    """What the SUT measured beyond LoadGen (the optional ``extra_results()`` of the SUT
    contract): ``{"metrics": {name: {"value", "unit", "higher_is_better"}}, "mlperf": {...},
    "warnings": [...], "packages": {...}}``, as the report key ``sut_extra``; read after
    :meth:`stop`, so a SUT can finish its bookkeeping first."""
    extra = getattr(sut, "extra_results", None)
    if not callable(extra):
        return {}
    value = extra()
    if not isinstance(value, dict):
        raise StepFailed(f"sut {_sut_name(sut)}: extra_results() returned {type(value).__name__}, not a dict")
    return {"sut_extra": value}


def sut_errors(sut: Any) -> dict[str, Any]:
    """The SUT's failed samples (the optional ``errors()`` / ``error_count`` of the
    contract), as report keys ``sut_errors`` (one-line reasons) and ``failed_samples``;
    nothing for a SUT that does not report errors."""
    errors = getattr(sut, "errors", None)
    if not callable(errors):
        return {}
    reasons = errors()
    if not isinstance(reasons, (list, tuple)):
        raise StepFailed(f"sut {_sut_name(sut)}: errors() returned {type(reasons).__name__}, not a list of str")
    lines = [" ".join(str(r).split()) for r in reasons]
    count = getattr(sut, "error_count", None)
    failed = int(count) if isinstance(count, int) and not isinstance(count, bool) else None
    return {"sut_errors": [line for line in lines if line], "failed_samples": failed}


def _sut_name(sut: Any) -> str:
    return str(getattr(sut, "name", type(sut).__name__))


def _describe(sut: Any) -> dict[str, Any]:
    """The model and software facts the SUT and this process know about."""
    out: dict[str, Any] = {"model": getattr(sut, "model_name", None) or sut.name}
    info = getattr(sut, "model_info", None)
    if isinstance(info, dict):
        out["model_info"] = info
    dataset = getattr(sut, "dataset_info", None)  # optional: {"name": ...} of the QSL's data
    if isinstance(dataset, dict):
        out["dataset_info"] = dataset
    packages = {"mlcommons-loadgen": metadata.version("mlcommons-loadgen")}
    software: dict[str, Any] = {"packages": packages}
    torch = sys.modules.get("torch")
    if torch is not None:
        software.update(framework="pytorch", framework_version=str(torch.__version__))
        packages["torch"] = str(torch.__version__)
    for name in ("transformers", "numpy", "scikit-learn"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    out["software"] = software
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m cmx_mlperf.harness.child SPEC.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[1]).resolve()
    out_dir = spec_path.parent
    try:
        report = run_test(LoadgenSpec.from_file(spec_path), out_dir)
    except CmxError as exc:
        message = " ".join(str(exc).split())
        (out_dir / ERROR).write_text(f"{type(exc).__name__}\t{message}\n")
        print(message, file=sys.stderr)
        return EXIT_USER_ERROR
    (out_dir / REPORT).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
