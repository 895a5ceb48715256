"""A problem's generator and tester as calls: ``tools/gen.py SEED`` prints one input;
``tools/tester.py INPUT OUTPUT`` prints ``Score = N`` on stderr and exits 0 (see
:func:`read_tester`). Both run confined like the solution, with ``tools/`` mounted read-only at ``/tools``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.runner import Call, CallLimits
from cmx_core.errors import UsageError

TOOLS_AT = "/tools"
TOOL_LIMITS = CallLimits(wall_s=60.0, cpu_s=60.0, memory_bytes=2 << 30, output_bytes=64 << 20)
SCORE_PREFIX = re.compile(r"^Score = (-?\d+)")


BUILT_RECORD = "cmx-tools.json"
"""Written by ``cmx ale-bench import`` beside data.json: where the Rust tools' binaries are."""


@dataclass(frozen=True)
class Tools:
    """Where a problem's generator and tester are: ``tools/gen.py`` and ``tools/tester.py``, or
    the ``gen`` and ``tester`` binaries built from its Rust ``tools/`` crate (``binary``)."""

    folder: Path
    binary: bool = False

    @classmethod
    def of(cls, problem_root: Path) -> Tools:
        folder = problem_root / "tools"
        if all((folder / name).is_file() for name in ("gen.py", "tester.py")):
            return cls(folder)
        record = problem_root / BUILT_RECORD
        if record.is_file():
            return cls(_built_bin_dir(record), binary=True)
        if (folder / "Cargo.toml").is_file():
            raise UsageError(f"{folder / 'Cargo.toml'}: the Rust tools are not built; import the package first "
                             f"(cmx ale-bench import {problem_root})")
        raise UsageError(f"{folder}: neither tools/gen.py and tools/tester.py nor a Rust tools/ crate (Cargo.toml)")

    def gen_call(self, seed: int, work_dir: Path) -> Call:
        """The generator for one seed: ``gen.py SEED`` prints it; the Rust ``gen seeds.txt``
        writes ``in/0000.txt`` (see :meth:`generated`)."""
        if self.binary:
            (work_dir / "seeds.txt").write_text(f"{seed}\n", encoding="utf-8")
            return Call(argv=(f"{TOOLS_AT}/gen", "seeds.txt"), work_dir=work_dir, limits=TOOL_LIMITS,
                        binds={str(self.folder): TOOLS_AT})
        return Call(argv=("/usr/bin/python3", f"{TOOLS_AT}/gen.py", str(seed)), work_dir=work_dir,
                    limits=TOOL_LIMITS, binds={str(self.folder): TOOLS_AT})

    def generated(self, stdout: bytes, work_dir: Path) -> bytes:
        """The input a generator call made: its stdout, or the Rust gen's ``in/0000.txt``."""
        if not self.binary:
            return stdout
        path = work_dir / "in" / "0000.txt"
        return path.read_bytes() if path.is_file() else b""

    def tester_call(self, work_dir: Path) -> Call:
        """The tester over ``input.txt`` and ``output.txt`` in ``work_dir``."""
        argv = (f"{TOOLS_AT}/tester",) if self.binary else ("/usr/bin/python3", f"{TOOLS_AT}/tester.py")
        return Call(argv=(*argv, "input.txt", "output.txt"), work_dir=work_dir, limits=TOOL_LIMITS,
                    binds={str(self.folder): TOOLS_AT})

    def reactive_call(self, solution: tuple[str, ...], work_dir: Path, limits: CallLimits,
                      binds: dict[str, str], env: dict[str, str], case_input: bytes) -> Call:
        """A reactive case: the tester reads the input on stdin and runs the solution itself
        (``tester SOLUTION...``), as the real reactive testers do."""
        argv = (f"{TOOLS_AT}/tester",) if self.binary else ("/usr/bin/python3", f"{TOOLS_AT}/tester.py")
        return Call(argv=(*argv, *solution), work_dir=work_dir, limits=limits,
                    binds={**binds, str(self.folder): TOOLS_AT}, env=env, stdin=case_input)


def _built_bin_dir(record: Path) -> Path:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        folder = Path(str(data["bin_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"{record}: not the record 'cmx ale-bench import' writes (bin_dir); import the package "
                         "again") from None
    missing = [name for name in ("gen", "tester") if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"{record}: the built tools in {folder} lack {', '.join(missing)} (the cache was cleared?); "
                         "import the package again")
    return folder


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
