"""The baseline of a report's comparison (issue 53 item 4): the run the user names
(``--baseline RUN``), or else the earliest run that matches the newest run's configuration
and hardware class and is not flagged. A flagged run (planned from a facts file instead of
this machine's detection, or measured under noisy conditions) is never chosen by default:
every delta against it would measure the flag too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.results.compare import config_of
from cmx_core.results.hardware import of_document

Group = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Baseline:
    """The groups with the baseline first, and why it was taken (a sentence for the page)."""

    groups: tuple[Group, ...]
    why: str


def flag_of(document: Mapping[str, Any]) -> str | None:
    """Why a run makes a poor baseline, or None."""
    facts = (document.get("provenance") or {}).get("facts_file")
    if facts:
        return f"planned from the facts file {facts.get('path')}, not this machine's detection"
    warnings = (document.get("conditions") or {}).get("warnings") or []
    if warnings:
        return f"measured under noisy conditions ({warnings[0].get('message', warnings[0].get('cause'))})"
    if document.get("status") == "error":
        return "failed"
    return None


def choose(groups: Sequence[Group], named: str | None = None) -> Baseline:
    """``groups`` (oldest first) with the baseline moved to the front."""
    if named:
        index = next((i for i, g in enumerate(groups) if any(d["run_id"].startswith(named) for d in g)), None)
        if index is None:
            raise UsageError(f"--baseline {named}: not one of the report's runs; name one of them (cmx results list)")
        return Baseline(_first(groups, index), f"baseline {groups[index][0]['run_id']}: named with --baseline")
    newest = groups[-1][0]
    earlier = range(len(groups) - 1)  # the newest run is what is compared, not its own baseline
    like = [i for i in earlier if _same_class(groups[i][0], newest) and config_of(groups[i][0]) == config_of(newest)]
    fair = [i for i in like if not any(flag_of(d) for d in groups[i])]
    skipped = [(g[0]["run_id"], flag_of(d)) for i in like for g in [groups[i]] for d in g[:1] if flag_of(d)]
    if fair:
        note = "; ".join(f"not {run} ({why})" for run, why in skipped[:3])
        return Baseline(_first(groups, fair[0]), f"baseline {groups[fair[0]][0]['run_id']}: the earliest run of the "
                                                 "newest run's configuration and hardware class"
                                                 + (f"; {note}" if note else ""))
    unflagged = [i for i in earlier if not any(flag_of(d) for d in groups[i])]
    index = unflagged[0] if unflagged else 0
    why = "the earliest run that is not flagged" if unflagged else "the earliest run (every run is flagged)"
    return Baseline(_first(groups, index), f"baseline {groups[index][0]['run_id']}: {why}; no unflagged earlier run "
                                           "has the newest run's configuration and hardware class")


def _same_class(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return of_document(a).id == of_document(b).id


def _first(groups: Sequence[Group], index: int) -> tuple[Group, ...]:
    return (groups[index], *groups[:index], *groups[index + 1:])
