"""The resolver's reasoning, as ``cmx explain`` shows it: each node's candidates and why
each was taken or refused, the variations chosen, and the dependency path that asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Candidate(NamedTuple):
    """A recipe considered for a query, and why it was taken or rejected."""

    name: str
    source: str
    accepted: bool
    reason: str


class Path(NamedTuple):
    """The recipes from the root down to a node, as a linked list: a child shares its
    parent's path, so a deep chain costs one cell per node, not a tuple per node."""

    name: str
    up: Path | None

    def names(self) -> tuple[str, ...]:
        """Root first."""
        out: list[str] = []
        cell: Path | None = self
        while cell is not None:
            out.append(cell.name)
            cell = cell.up
        return tuple(reversed(out))


@dataclass
class Decision:
    """The reasoning for one node: candidates, variations, skipped deps and steps."""

    query: tuple[str, ...]
    path: Path | None
    node_id: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    variations: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chosen: list[tuple[str, str]] = field(default_factory=list)
    """(dep alias, why): a dep with ``cached_alternatives`` and the tags it was given."""

    @property
    def chain(self) -> tuple[str, ...]:
        """The recipe names from the root to the node that asked for this one."""
        return self.path.names() if self.path is not None else ()
