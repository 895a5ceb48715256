"""MLPerf's compliance checker (``mlperf_logging.compliance_checker``, the training 6.1.0
rules) run on a time-to-accuracy log.

The package's ``training_6.1.0/common.yaml`` is used as shipped except for the one rule that
lists MLPerf's own benchmarks: ours (``digits_cnn``, ``resnet``, ``bert``) are not among the
6.1.0 ones, so that rule is replaced by one naming ours and enqueueing this run's benchmark
rules (the target accuracy reached at least once, the global batch and the optimiser stated
once). The division is always ``open``, whose rules the package's ``open_common.yaml`` would
otherwise re-check against the same benchmark list.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

RULESET = "6.1.0"


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    ruleset: str
    config: str
    message: str


def _rules(benchmark: str, target: float, folder: Path) -> Path:
    import mlperf_logging.compliance_checker as checker  # type: ignore[import-untyped]
    import yaml

    common = Path(checker.__file__).parent / f"training_{RULESET}" / "common.yaml"
    records = yaml.safe_load(common.read_text(encoding="utf-8"))
    ours = folder / f"open_{benchmark}.yaml"
    for record in records:
        key = record.get("KEY") or {}
        if key.get("NAME") == "submission_benchmark":
            key["CHECK"] = f" v['value'] == '{benchmark}' "
            key["POST"] = f" enqueue_config('{ours}') "
        if key.get("NAME") == "submission_division":
            key["CHECK"] = " v['value'] == 'open' "
            key["POST"] = " s['compile_time_mins'] = 240 "
    benchmark_rules = [
        {"KEY": {"NAME": "global_batch_size", "REQ": "EXACTLY_ONE", "CHECK": " v['value'] > 0 "}},
        {"KEY": {"NAME": "opt_name", "REQ": "EXACTLY_ONE", "CHECK": " v['value'] == 'sgd' "}},
        {"KEY": {"NAME": "seed", "REQ": "EXACTLY_ONE"}},
        {"KEY": {"NAME": "eval_accuracy", "REQ": "AT_LEAST_ONE", "CHECK": ["'epoch_num' in v['metadata']"],
                 "ATLEAST_ONE_CHECK": f"v['value'] >= {target!r} and v['value'] <= 1.0"}},
    ]
    folder.mkdir(parents=True, exist_ok=True)
    ours.write_text(yaml.safe_dump(benchmark_rules, sort_keys=False), encoding="utf-8")
    config = folder / "common.yaml"
    config.write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    return config


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
