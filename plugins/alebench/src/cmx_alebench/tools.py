"""A problem's generator and tester as calls: ``tools/gen.py SEED`` prints one input;
``tools/tester.py INPUT OUTPUT`` ends its stderr with ``Score = N`` (``wrong answer: ...``
means WA). Both run confined like the solution, with ``tools/`` mounted read-only at ``/tools``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.runner import Call, CallLimits
from cmx_core.errors import UsageError

TOOLS_AT = "/tools"
TOOL_LIMITS = CallLimits(wall_s=60.0, cpu_s=60.0, memory_bytes=2 << 30, output_bytes=64 << 20)
SCORE_LINE = re.compile(r"^Score\s*=\s*(-?\d+)\s*$")


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
    """What the tester's stderr says: a score, a wrong answer, or neither (an internal error)."""

    score: int | None
    wrong_answer: str | None
    problem: str | None


def read_tester(stderr: bytes, exit_code: int | None) -> TesterVerdict:
    """Parse the tester protocol: a ``wrong answer:`` line wins; else the last line must be ``Score = N``."""
    lines = [line.strip() for line in stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.lower().startswith("wrong answer:"):
            return TesterVerdict(None, line, None)
    match = SCORE_LINE.match(lines[-1]) if lines else None
    if match is None:
        last = lines[-1] if lines else "(no stderr)"
        return TesterVerdict(None, None,
                             f"tester's last stderr line is not 'Score = N' (exit {exit_code}): {last[:200]}")
    return TesterVerdict(int(match.group(1)), None, None)
