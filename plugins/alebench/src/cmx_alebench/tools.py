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
SCORE_PREFIX = re.compile(r"Score = (\d+)")


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
    """What the tester says: a score (accepted), why the output is a wrong answer, or (reactive
    problems) why the case is a runtime error."""

    score: int | None
    wrong_answer: str | None
    runtime_error: str | None = None


def read_tester(stderr: bytes, exit_code: int | None) -> TesterVerdict:
    """A batch tester's verdict, read as ALE-Bench's case runner reads it (§3.5), in this order:
    a non-zero exit is WRONG_ANSWER (even with a score printed); so is a stderr that contains
    ``wrong answer: `` anywhere; otherwise the last line of the stripped stderr must start with
    ``Score = `` and digits (text may follow them), else WRONG_ANSWER: a line printed after the
    score line, a negative score or no stderr at all is a wrong answer."""
    text = stderr.decode("utf-8", errors="replace").strip()
    told = WRONG_ANSWER + text.split(WRONG_ANSWER)[1][:300] if WRONG_ANSWER in text else None
    if exit_code != 0:
        return TesterVerdict(None, told or f"the tester exited {exit_code}: {_last(text)}")
    if told is not None:
        return TesterVerdict(None, told)
    return _score_line(text)


def read_reactive_tester(stderr: bytes, exit_code: int | None) -> TesterVerdict:
    """A reactive tester's verdict (it ran the solution itself), as ALE-Bench reads it: a
    non-zero exit or an empty stderr is RUNTIME_ERROR; otherwise the last stderr line must be the
    score line, as for a batch tester (a ``wrong answer: `` line alone does not decide)."""
    text = stderr.decode("utf-8", errors="replace").strip()
    if exit_code != 0 or not text:
        reason = f"the tester exited {exit_code}" if exit_code != 0 else "the tester printed nothing on stderr"
        return TesterVerdict(None, None, f"{reason}: {_last(text)}")
    return _score_line(text)


WRONG_ANSWER = "wrong answer: "


def _score_line(text: str) -> TesterVerdict:
    last = text.splitlines()[-1] if text else ""
    match = SCORE_PREFIX.match(last)
    if match is None:
        after = any(SCORE_PREFIX.match(line) for line in text.splitlines())
        what = "printed a line after its 'Score = N' line" if after else "printed no 'Score = N' line"
        return TesterVerdict(None, f"the tester {what}: {_last(text)}")
    return TesterVerdict(int(match.group(1)), None)


def _last(text: str) -> str:
    return text.splitlines()[-1][:200] if text else "(no stderr)"
