"""While the agent runs, the attempt reports its elapsed time and whether the submission is
there yet (cmx-core's application channel), not only when it ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx_mlebench.live import AgentWatch


@dataclass
class _Recorder:
    metrics_file: Path | None = None
    seen: list[tuple[str, float]] = field(default_factory=list)

    def report(self, name: str, value: float, kind: str = "gauge") -> None:
        self.seen.append((name, value))


def test_the_watch_reports_elapsed_seconds_and_the_submission_as_the_agent_goes(
        cmx_step_context: Any, tmp_path: Path) -> None:
    recorder = _Recorder()
    ctx = replace(cmx_step_context(), metrics=recorder)
    submission = tmp_path / "home" / "submission" / "submission.csv"
    with AgentWatch(ctx, submission, every_s=0.05):
        time.sleep(0.3)
        submission.parent.mkdir(parents=True)
        submission.write_text("id,label\n")
        time.sleep(0.3)
    assert recorder.seen[0] == ("agent_running", 1) and recorder.seen[-1] == ("agent_running", 0)
    elapsed = [v for name, v in recorder.seen if name == "agent_elapsed_seconds"]
    present = [v for name, v in recorder.seen if name == "submission_present"]
    assert len(elapsed) >= 3 and elapsed == sorted(elapsed) and elapsed[-1] >= 0.6  # reported while it ran
    assert present[0] == 0 and present[-1] == 1 and present == sorted(present)
