"""Which rank a failed launch lost first, and that rank's own error, from torchrun's report.

When a rank dies, torchrun ends the others (``Sending process N closing signal SIGTERM``) and
prints a ``ChildFailedError`` report: every failed rank's ``rank``, ``exitcode`` (``-9``:
SIGKILL), ``pid`` and ``traceback`` (``Signal 9 (SIGKILL) received by PID N``), and the one it
calls ``Root Cause (first observed failure)``. That "first" is only the first by the second
torchrun noticed it in: a rank that died of its peer's loss in the same poll can be named
instead of the peer (rank 0's gloo error for rank 1's kill). So the lost rank is read as:
a failed rank torchrun did not signal itself that died of a signal; else the root cause where
torchrun did not signal it; else any such rank; else the root cause. Its own error is the
one line the cmx worker wrote for it (``error-rank-N.txt``), else torchrun's traceback line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_ENTRY = re.compile(r"^\[\d+\]:\s*$")
_FIELD = re.compile(r"^\s+(\w+)\s*:\s?(.*)$")
_CLOSED = re.compile(r"Sending process (\d+) closing signal (SIG\w+)")
_ROOT = "Root Cause (first observed failure):"


@dataclass(frozen=True)
class Failure:
    """One failed rank of torchrun's report."""

    rank: int
    exitcode: int
    pid: int
    traceback: str
    root: bool

    @property
    def signal(self) -> int | None:
        return -self.exitcode if self.exitcode < 0 else None


@dataclass(frozen=True)
class LostRank:
    """The rank a launch lost: its number, the signal that ended it (None: it exited) and its own error."""

    rank: int
    signal: int | None
    error: str
    pid: int


def lost_rank(report: str, work: Path) -> LostRank | None:
    """The lost rank of torchrun's ``report`` (its output), or None where it printed none."""
    failures = _failures(report)
    if not failures:
        return None
    closed = {int(pid) for pid, _ in _CLOSED.findall(report)}
    own = [f for f in failures if f.pid not in closed]
    chosen = next((f for f in own if f.signal is not None), None) or next((f for f in own if f.root), None) \
        or (own[0] if own else next((f for f in failures if f.root), failures[0]))
    return LostRank(chosen.rank, chosen.signal, _own_error(chosen, work), chosen.pid)


TEARDOWN_ABORT = "terminate called without an active exception"
"""What libstdc++ prints when a C++ thread object is destroyed still running: torch's gloo
threads do it now and then in the interpreter's teardown, after the script's last line."""


def teardown_hint(report: str, lost: LostRank) -> str:
    """A hint for a rank that aborted in the interpreter's teardown (SIGABRT with
    :data:`TEARDOWN_ABORT` in the log), else ''. The run still failed: the process did."""
    if lost.signal != 6 or TEARDOWN_ABORT not in report:
        return ""
    return ("; the rank aborted in the interpreter's teardown ('" + TEARDOWN_ABORT + "', torch's gloo threads "
            "at exit): end the script with sys.stdout.flush() and os._exit(0) after destroy_process_group(), "
            "as cmx's own worker does")


def _own_error(failure: Failure, work: Path) -> str:
    try:
        line = (work / f"error-rank-{failure.rank}.txt").read_text(encoding="utf-8").strip()
    except OSError:
        line = ""
    return line or failure.traceback


def _failures(report: str) -> list[Failure]:
    """Every ``[i]:`` entry of the last report, the root cause marked."""
    lines = report.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == _ROOT]
    if not starts:
        return []
    begin = max((i for i, line in enumerate(lines[:starts[-1]]) if line.strip() == "Failures:"), default=starts[-1])
    found: list[Failure] = []
    fields: dict[str, str] | None = None
    for index in range(begin, len(lines)):
        line = lines[index]
        if _ENTRY.match(line.strip()):
            _add(found, fields)
            fields = {"root": "1" if index > starts[-1] else ""}
        elif fields is not None and (match := _FIELD.match(line)):
            fields.setdefault(match.group(1), match.group(2).strip())
        elif fields is not None and line.startswith("====="):
            break
    _add(found, fields)
    return found


def _add(found: list[Failure], fields: dict[str, str] | None) -> None:
    if fields is None:
        return
    rank = re.match(r"(\d+)", fields.get("rank", ""))
    code = re.match(r"(-?\d+)\s*\(pid:\s*(\d+)\)", fields.get("exitcode", ""))
    if rank is None or code is None:
        return
    found.append(Failure(int(rank.group(1)), int(code.group(1)), int(code.group(2)),
                         fields.get("traceback", ""), bool(fields.get("root"))))
