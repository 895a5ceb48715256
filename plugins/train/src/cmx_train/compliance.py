"""MLPerf's compliance checker (``mlperf_logging.compliance_checker``, the training 6.1.0
rules) run on a time-to-accuracy log.

The package's ``training_6.1.0/common.yaml`` and ``open_common.yaml`` are used as shipped
except for the rule that lists MLPerf's own benchmarks: ours (``digits_cnn``, ``resnet``,
``bert``) are not among the 6.1.0 ones, so that rule is replaced by one naming ours and
enqueueing this run's benchmark rules (the target accuracy reached at least once, the global
batch, optimiser and seed stated once). The division is always ``open`` (the division rule
then enqueues the edited ``open_common.yaml`` instead of the package's).
"""

from __future__ import annotations

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
    """Run the checker on ``log`` in a subprocess (it keeps module-level state)."""
    folder = log.parent / "compliance"
    config = _rules(benchmark, target, folder)
    out = folder / "compliance_checker.log"
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", RULESET, "--config", str(config), "--log_output", str(out), str(log)],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    text = (proc.stdout + proc.stderr).strip().splitlines()
    failed = [line for line in text if line.startswith(("ERROR", "WARNING")) and "FAILED" not in line]
    message = "SUCCESS" if proc.returncode == 0 else "; ".join(failed)[:500] or (text[-1] if text else "failed")
    return Verdict(proc.returncode == 0, f"training {RULESET}", str(config), message)
