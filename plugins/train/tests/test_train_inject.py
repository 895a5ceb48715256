"""``--inject kill-step@50%`` on a training run: rank 0 reports the fraction of its steps done
(``progress`` on the step's metrics channel), so the injection strikes the training step
halfway, for real; ``--retries 1 --retry-on killed`` runs it again and the run completes. The
struck attempt is recorded as killed and injected, at a moment after the training began; an
injection that never strikes is not recorded as one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_kill_step_at_half_strikes_the_training_step_and_the_retry_completes(cli: Any, as_json: Any,
                                                                             home: Path) -> None:
    proc = cli("run", "recipe", "--tags=train,throughput", "--steps=400", "--batch-size=32",
               "--inject=kill-step@50%", "--retries=1", "--retry-on=killed", "--json", CMX_TRAIN_THREADS="1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = as_json(proc)
    assert result["status"] == "valid"
    [struck, retry] = result["attempts"]
    assert (struck["step"], struck["number"], struck["fault"], struck["injected"]) == \
        ("step0", 1, "killed", "kill-step@50%")
    assert struck["injected_at"] > struck["started"] and retry["number"] == 2 and retry["fault"] is None
    metrics = next(p for p in next(home.glob(f"data/runs/*{result['run_id'][:8]}*")).rglob("app_metrics.txt")
                   if "attempt-" not in str(p))
    fractions = [float(line.split()[1]) for line in metrics.read_text().splitlines() if line.startswith("progress ")]
    assert fractions and max(fractions) >= 0.5 and max(fractions) < 1.0  # struck halfway, before the end


def test_an_injection_that_never_strikes_is_not_recorded(cli: Any, as_json: Any) -> None:
    """kill-step@50% on a step that reports no progress (the demo sort) never strikes: the run
    has no attempt and no fault, and the injection asked for stays in its provenance."""
    proc = cli("run", "recipe", "--tags=demo,sort", "--inject=kill-step@50%", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = as_json(proc)
    assert not result.get("attempts") and not result.get("faults")
    assert json.dumps(result).count("kill-step@50%") >= 1  # what was asked stays in the provenance
