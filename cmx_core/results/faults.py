"""A run's ``attempts`` and ``faults`` sections, and the fault-tolerance report of a run or
sweep (docs/faults.md).

``attempts`` lists every attempt of each step that failed, was retried or had a fault
injected; ``faults`` one entry per failed attempt with its class, whether it was injected,
the time to detect it (from the injection to the attempt's end, when the injection time is
known), the time to recover (from its end to the next attempt's start) and the work lost.
The report sums them up: how many faults, the mean and worst detect and recover times,
the work lost, and the completeness (the share of runs or points that ended without error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.providers.attempts import Attempt


def attempts_section(attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
    return [a.to_json() for a in attempts]


def faults_section(attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
    """One entry per failed attempt, with its detect and recover times."""
    faults = []
    for attempt in attempts:
        if attempt.fault is None:
            continue
        later = [a for a in attempts if (a.node, a.step) == (attempt.node, attempt.step) and a.number > attempt.number]
        following = min(later, key=lambda a: a.number, default=None)
        faults.append({
            "class": attempt.fault, "node": attempt.node, "step": attempt.step, "attempt": attempt.number,
            "injected": attempt.injected,
            "detect_s": _round(attempt.ended - attempt.injected_at) if attempt.injected_at is not None else None,
            "recover_s": _round(following.started - attempt.ended) if following is not None else None,
            "work_lost_s": _round(attempt.work_lost_s),
            "recovered": any(a.fault is None for a in later),
        })
    return faults


def _round(value: float) -> float:
    return round(max(value, 0.0), 6)


@dataclass(frozen=True)
class FaultReport:
    """The fault tolerance of a run or a sweep's points."""

    runs: int
    completed: int
    faults: int
    injected: int
    recovered: int
    detect_s: tuple[float, ...]
    recover_s: tuple[float, ...]
    work_lost_s: float
    classes: Mapping[str, int]

    @property
    def completeness(self) -> float:
        return self.completed / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "completed": self.completed, "completeness": round(self.completeness, 6),
                "faults": self.faults, "injected": self.injected, "recovered": self.recovered,
                "classes": dict(self.classes), "work_lost_s": round(self.work_lost_s, 6),
                "detect_s": _stats(self.detect_s), "recover_s": _stats(self.recover_s)}

    def lines(self) -> list[str]:
        """The report as ``cmx results show`` prints it."""
        classes = ", ".join(f"{name} x{count}" for name, count in sorted(self.classes.items())) or "none"
        return [f"faults: {self.faults} ({classes}); {self.injected} injected, {self.recovered} recovered",
                f"time to detect: {_shown(self.detect_s)}; time to recover: {_shown(self.recover_s)}",
                f"work lost: {self.work_lost_s:.2f} s; completeness: {self.completed}/{self.runs} "
                f"({100 * self.completeness:.0f}%)"]


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"mean": round(sum(values) / len(values), 6) if values else None,
            "max": round(max(values), 6) if values else None}


def _shown(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    return f"mean {sum(values) / len(values):.3f} s, max {max(values):.3f} s"


def fault_report(documents: Iterable[Mapping[str, Any]], expected: int | None = None) -> FaultReport | None:
    """The report over result documents (one run, or a sweep's points: ``expected`` of them,
    a point that recorded no result counting as incomplete); None when none of them had a
    fault or an injection."""
    docs = list(documents)
    faults = [f for d in docs for f in d.get("faults") or ()]
    if not faults and not any((d.get("provenance") or {}).get("injections") for d in docs):
        return None
    classes: dict[str, int] = {}
    for fault in faults:
        classes[fault["class"]] = classes.get(fault["class"], 0) + 1
    return FaultReport(
        runs=max(expected or 0, len(docs)), completed=sum(d.get("status") != "error" for d in docs), faults=len(faults),
        injected=sum(bool(f.get("injected")) for f in faults), recovered=sum(bool(f.get("recovered")) for f in faults),
        detect_s=tuple(f["detect_s"] for f in faults if f.get("detect_s") is not None),
        recover_s=tuple(f["recover_s"] for f in faults if f.get("recover_s") is not None),
        work_lost_s=sum(float(f.get("work_lost_s") or 0) for f in faults), classes=classes)


def attempt_lines(document: Mapping[str, Any]) -> list[str]:
    """Each recorded attempt of a run, one line each, as ``cmx results show`` prints them."""
    lines = []
    for a in document.get("attempts") or ():
        how = a["fault"] or "succeeded"
        extra = [f"injected {a['injected']}"] if a.get("injected") else []
        extra += ["resumed from its checkpoint"] if a.get("resumed") else []
        extra += [f"work lost {a['work_lost_s']:.2f} s"] if a["fault"] else []
        lines.append(f"attempt {a['number']} of {a['node']}/{a['step']}: {how} after {a['wall_s']:.2f} s"
                     + (f" ({'; '.join(extra)})" if extra else ""))
    return lines
