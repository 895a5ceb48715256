"""A problem's generator and tester as calls: ``tools/gen.py SEED`` prints one input;
``tools/tester.py INPUT OUTPUT`` prints ``Score = N`` on stderr and exits 0 (see
:func:`read_tester`). Both run confined like the solution, with ``tools/`` mounted read-only at ``/tools``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.runner import Call, CallLimits
from cmx_core.errors import UsageError

TOOLS_AT = "/tools"
TOOL_LIMITS = CallLimits(wall_s=60.0, cpu_s=60.0, memory_bytes=2 << 30, output_bytes=64 << 20)
SCORE_PREFIX = re.compile(r"^Score = (-?\d+)")


@dataclass(frozen=True)
class Tools:
    """Where a problem's generator and tester are."""

    folder: Path

    @classmethod
    def of(cls, problem_root: Path) -> Tools:
        folder = problem_root / "tools"
        for name in ("gen.py", "tester.py"):
            if not (folder / name).is_file():
                raise UsageError(f"{folder / name}: missing; cmx-alebench runs a problem's tools/gen.py and "
                                 "tools/tester.py (a Rust tools/ crate must be built into them first)")
        return cls(folder)

    def gen_call(self, seed: int, work_dir: Path) -> Call:
        return Call(argv=("/usr/bin/python3", f"{TOOLS_AT}/gen.py", str(seed)), work_dir=work_dir,
                    limits=TOOL_LIMITS, binds={str(self.folder): TOOLS_AT})

    def tester_call(self, work_dir: Path) -> Call:
        """The tester over ``input.txt`` and ``output.txt`` in ``work_dir``."""
        return Call(argv=("/usr/bin/python3", f"{TOOLS_AT}/tester.py", "input.txt", "output.txt"),
                    work_dir=work_dir, limits=TOOL_LIMITS, binds={str(self.folder): TOOLS_AT})


@dataclass(frozen=True)
class TesterVerdict:
    """What the tester says: a score (accepted), or why the output is a wrong answer."""

    score: int | None
    wrong_answer: str | None


def read_tester(stderr: bytes, exit_code: int | None) -> TesterVerdict:
    """The real testers' protocol (§3.5): the score is the last stderr line that starts with
    ``Score = `` followed by an integer; a non-zero exit is WRONG_ANSWER even with a score
    printed, and an exit 0 without a score line is WRONG_ANSWER too."""
    lines = [line.strip() for line in stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    told = next((line for line in lines if line.lower().startswith("wrong answer")), None)
    scores = [m.group(1) for m in (SCORE_PREFIX.match(line) for line in lines) if m is not None]
    last = lines[-1][:200] if lines else "(no stderr)"
    if exit_code != 0:
        return TesterVerdict(None, told or f"the tester exited {exit_code}: {last}")
    if not scores:
        return TesterVerdict(None, told or f"the tester printed no 'Score = N' line: {last}")
    return TesterVerdict(int(scores[-1]), None)
