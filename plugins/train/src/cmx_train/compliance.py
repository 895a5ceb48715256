"""MLPerf's compliance checker (``mlperf_logging.compliance_checker``) run on a
time-to-accuracy log and recorded for what it is.

:func:`official`: the checker exactly as shipped (``--usage training --ruleset R``, no config
of ours); only its verdict is ever recorded as ``accepted``, with the package's version and
the command. R is the newest training ruleset of the installed package that names the run's
benchmark (ships its ``open_<benchmark>.yaml``, :func:`ruleset_for`): ``resnet`` (ResNet-50)
is named up to 4.0.0 and ``bert`` up to 5.1.0 in mlperf-logging 4.1.68. A benchmark that no
ruleset names (``digits_cnn``) is checked under 6.1.0, the newest, and fails it, rightly.

:func:`check`: the common rules only. The package's ``training_6.1.0/common.yaml`` and
``open_common.yaml`` are used as shipped except for the rule that lists MLPerf's own
benchmarks, which is replaced by one naming ours and enqueueing this run's benchmark rules
(the target accuracy reached at least once, the global batch, optimiser and seed stated
once), and the division, forced to ``open``. Its verdict is recorded as ``common_rules``,
saying it was checked under rules cmx edited: never as acceptance under the ruleset. (This
check runs only for a benchmark no ruleset names.)
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RULESET = "6.1.0"


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    ruleset: str
    config: str
    message: str


COMMON_RULES_NOTE = ("not an MLPerf benchmark of training {ruleset}: checked under its common rules only, as cmx "
                     "edited them (division forced to open, the benchmark list replaced by '{benchmark}', 4 rules "
                     "of cmx's own); no claim of acceptance")


def _load(name: str) -> list[dict[str, Any]]:
    # deferred: mlperf_logging only when this runs (2 modules)
    import mlperf_logging.compliance_checker as checker  # type: ignore[import-untyped]
    import yaml  # deferred: yaml only when this runs (26 modules)

    path = Path(checker.__file__).parent / f"training_{RULESET}" / name
    records: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return records


def _replace(records: list[dict[str, Any]], name: str, **rule: str) -> int:
    hits = 0
    for record in records:
        key = record.get("KEY") or {}
        if key.get("NAME") == name:
            key.update(rule)
            hits += 1
    return hits


def _rules(benchmark: str, target: float, folder: Path) -> Path:
    """The package's ``common.yaml`` and ``open_common.yaml`` with the benchmark list
    replaced by ours, and our benchmark's own rules; returns the entry config."""
    import yaml  # deferred: yaml only when this runs (26 modules)

    folder.mkdir(parents=True, exist_ok=True)
    ours, open_common, common = (folder / f"open_{benchmark}.yaml", folder / "open_common.yaml",
                                 folder / "common.yaml")
    records = _load("common.yaml")
    if not _replace(records, "submission_division", CHECK=" v['value'] == 'open' ",
                    POST=f" enqueue_config('{open_common}'); s['compile_time_mins'] = 240 "):
        raise RuntimeError(f"mlperf-logging's training_{RULESET}/common.yaml has no submission_division rule")
    opened = _load("open_common.yaml")
    if not _replace(opened, "submission_benchmark", CHECK=f" v['value'] == '{benchmark}' ",
                    POST=f" enqueue_config('{ours}') "):
        raise RuntimeError(f"mlperf-logging's training_{RULESET}/open_common.yaml has no submission_benchmark rule")
    benchmark_rules = [
        {"KEY": {"NAME": "global_batch_size", "REQ": "EXACTLY_ONE", "CHECK": " v['value'] > 0 "}},
        {"KEY": {"NAME": "opt_name", "REQ": "EXACTLY_ONE", "CHECK": " v['value'] == 'sgd' "}},
        {"KEY": {"NAME": "seed", "REQ": "EXACTLY_ONE"}},
        {"KEY": {"NAME": "eval_accuracy", "REQ": "AT_LEAST_ONE",
                 "CHECK": ["'epoch_num' in v['metadata']", "'samples_count' in v['metadata']"],
                 "ATLEAST_ONE_CHECK": f"v['value'] >= {target!r} and v['value'] <= 1.0"}},
    ]
    ours.write_text(yaml.safe_dump(benchmark_rules, sort_keys=False), encoding="utf-8")
    open_common.write_text(yaml.safe_dump(opened, sort_keys=False), encoding="utf-8")
    common.write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    return common


def check(log: Path, benchmark: str, target: float, timeout_s: float = 120.0) -> Verdict:
    """The common rules as cmx edited them (module docstring), on ``log`` in a subprocess (the
    checker keeps module-level state)."""
    folder = log.parent / "compliance"
    config = _rules(benchmark, target, folder)
    out = folder / "compliance_checker.log"
    return _verdict(_checker(["--config", str(config), "--log_output", str(out), str(log)], timeout_s), str(config))


def official(log: Path, ruleset: str = RULESET, timeout_s: float = 120.0) -> Verdict:
    """The checker as shipped under ``ruleset``, on ``log``: ``config`` is the command, with
    the log's file name."""
    args = ["--log_output", str(log.parent / "compliance" / "official_checker.log"), str(log)]
    (log.parent / "compliance").mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m mlperf_logging.compliance_checker", *_base(ruleset), log.name])
    return _verdict(_checker(args, timeout_s, ruleset), command, ruleset)


def _base(ruleset: str) -> tuple[str, ...]:
    return ("--usage", "training", "--ruleset", ruleset)


def _checker(args: list[str], timeout_s: float, ruleset: str = RULESET) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", *_base(ruleset), *args],
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def _verdict(proc: subprocess.CompletedProcess[str], config: str, ruleset: str = RULESET) -> Verdict:
    text = (proc.stdout + proc.stderr).strip().splitlines()
    failed = [line for line in text if line.startswith(("ERROR", "WARNING")) and "FAILED" not in line]
    message = "SUCCESS" if proc.returncode == 0 else "; ".join(failed)[:500] or (text[-1] if text else "failed")
    return Verdict(proc.returncode == 0, f"training {ruleset}", config, message)


def ruleset_for(benchmark: str) -> str | None:
    """The newest training ruleset of the installed mlperf-logging that names ``benchmark``
    (ships its ``open_<benchmark>.yaml``); None when none does."""
    import mlperf_logging.compliance_checker as checker  # deferred: mlperf_logging only when this runs

    found = []
    for folder in Path(checker.__file__).parent.glob("training_*"):
        version = folder.name.removeprefix("training_")
        parts = version.split(".")
        if all(p.isdigit() for p in parts) and (folder / f"open_{benchmark}.yaml").is_file():
            found.append((tuple(int(p) for p in parts), version))
    return max(found)[1] if found else None


def checker_version() -> str:
    try:
        return f"mlperf-logging {importlib.metadata.version('mlperf-logging')}"
    except importlib.metadata.PackageNotFoundError:
        return "mlperf-logging (version unknown)"


MLPERF_NOTE = ("the unmodified checker judges the log's events and keys under training {ruleset}'s open division; "
               "the run itself is unofficial (train.unofficial_reasons): it is no MLPerf result")


def record(log: Path, benchmark: str, target: float) -> dict[str, Any]:
    """The result's ``train.compliance``: the unmodified checker's verdict (``accepted``) under
    the newest ruleset that names the benchmark, its version and command; for a benchmark no
    ruleset names, the verdict under the newest ruleset and the common-rules verdict beside it,
    labelled as checked under edited rules."""
    ruleset = ruleset_for(benchmark)
    shipped = official(log, ruleset or RULESET)
    common = None if ruleset else check(log, benchmark, target)
    return {"accepted": shipped.accepted, "ruleset": shipped.ruleset, "message": shipped.message,
            "checker": checker_version(), "command": shipped.config, "mlperf_benchmark": ruleset is not None,
            "note": MLPERF_NOTE.format(ruleset=ruleset) if ruleset else "",
            "common_rules": None if common is None else {
                "passed": common.accepted, "message": common.message,
                "note": COMMON_RULES_NOTE.format(ruleset=RULESET, benchmark=benchmark)}}


def refusal(compliance: dict[str, Any]) -> str:
    """Why the run is invalid by the checker ("" when it is not): an MLPerf benchmark the
    unmodified checker refuses, or any other benchmark its common rules refuse."""
    common = compliance.get("common_rules")
    if common is None:
        return "" if compliance["accepted"] else f"MLPerf compliance checker: {compliance['message']}"
    return "" if common["passed"] else f"MLPerf compliance checker (common rules): {common['message']}"
