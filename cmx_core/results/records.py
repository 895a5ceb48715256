"""The records ``ResultStore`` returns (kept apart from the store so that indexing a run,
on every ``cmx run``, does not pay for creating these classes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunSummary:
    """One row of ``cmx results list``."""

    run_id: str
    created_at: str
    status: str
    recipe: str
    suite: str
    task: str
    scenario: str | None
    primary_metric: str | None
    result: float | None
    units: str | None
    wall_s: float | None
    result_path: Path

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["result_path"] = str(self.result_path)
        return data


@dataclass(frozen=True)
class StoredResult:
    """A run read back from its ``result.json`` (validated)."""

    run_id: str
    path: Path
    document: dict[str, Any]

    @property
    def run_dir(self) -> Path:
        return self.path.parent


@dataclass
class ReindexReport:
    """What ``reindex`` did: runs indexed, rows dropped (file gone), files skipped (why)."""

    indexed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "indexed": self.indexed,
            "dropped": self.dropped,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
        }
