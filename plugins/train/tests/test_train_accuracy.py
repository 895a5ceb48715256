"""Time to accuracy on the small model reaches its target and writes an MLPerf-style log with
mllog. MLPerf's compliance checker, unmodified, refuses it (``digits_cnn`` is not a training
6.1.0 benchmark), and the result says so: ``accepted`` is that verdict, with the checker's
version and command; the common rules as cmx edited them pass it, recorded as such, and
refuse a log that misses a required event or never reaches the target; an unreachable target
is converged: false."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

from cmx_train.compliance import check


def test_time_to_accuracy_reaches_the_target_and_the_checker_accepts(train: Any, tmp_path: Path) -> None:
    out = train(mode="time-to-accuracy", target_accuracy=0.9, batch_size=32, max_epochs=15)
    part = out.result
    section = part.sections["train"]
    assert part.status == "valid", part.invalid_reasons
    assert section["converged"] is True and out.outputs["converged"] is True
    assert part.metrics["val_accuracy"].value >= 0.9 and section["val_accuracy"][-1] >= 0.9
    assert part.metrics["epochs_to_accuracy"].value == len(section["val_accuracy"])
    assert part.metrics["time_to_accuracy_s"].value > 0 and part.metrics["time_to_accuracy_s"].unit == "s"
    log = Path(out.outputs["work_dir"]) / "mlperf_log.txt"
    compliance = section["compliance"]
    unmodified = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                                 "--ruleset", "6.1.0", str(log)], capture_output=True, text=True, timeout=120,
                                check=False, cwd=tmp_path)  # its compliance_checker.log there
    assert unmodified.returncode != 0 and compliance["accepted"] is False  # the shipped checker's own verdict
    assert compliance["ruleset"] == "training 6.1.0" and compliance["mlperf_benchmark"] is False
    assert compliance["checker"] == f"mlperf-logging {importlib.metadata.version('mlperf-logging')}"
    assert compliance["command"] == ("python -m mlperf_logging.compliance_checker --usage training "
                                     "--ruleset 6.1.0 mlperf_log.txt")
    assert compliance["common_rules"]["passed"] is True and compliance["common_rules"]["message"] == "SUCCESS"
    assert compliance["common_rules"]["note"].startswith("not an MLPerf benchmark of training 6.1.0")
    text = log.read_text()
    assert text.startswith(":::MLLOG") and '"key": "run_stop"' in text and '"status": "success"' in text
    # the checker really checks: drop run_stop, or ask for more than was reached
    broken = log.with_name("broken_log.txt")
    broken.write_text("".join(line for line in text.splitlines(True) if '"run_stop"' not in line))
    assert not check(broken, "digits_cnn", 0.9).accepted
    assert not check(log, "digits_cnn", 0.999).accepted


def test_an_unreached_target_is_not_converged(train: Any) -> None:
    part = train(mode="time-to-accuracy", target_accuracy=1.0, batch_size=64, max_epochs=1).result
    assert part.status == "invalid" and part.sections["train"]["converged"] is False
    assert part.metrics["time_to_accuracy_s"].value is None
    assert "did not reach target_accuracy 1.0 in 1 epochs" in part.invalid_reasons[0]


def test_two_ranks_reach_the_target_too(train: Any) -> None:
    part = train(mode="time-to-accuracy", target_accuracy=0.9, batch_size=32, max_epochs=15, nproc=2).result
    assert part.status == "valid" and part.sections["train"]["world_size"] == 2
    compliance = part.sections["train"]["compliance"]
    assert compliance["common_rules"]["passed"] is True and compliance["accepted"] is False
