"""What a node's templates and steps see: a read-only, lazy view of the facts that
remembers what was read, and the node's variation groups."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cmx_core.datautil import freeze
from cmx_core.facts.store import FactStore
from cmx_core.plan.planner import PlanNode


class FactsView(Mapping[str, Any]):
    """Read-only, lazy access to facts for steps and templates; remembers what was read."""

    def __init__(self, store: FactStore) -> None:
        self._store = store
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        value = freeze(self._store.get(name))
        self.read.add(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.available())

    def __len__(self) -> int:
        return len(self._store.available())


def groups_of(node: PlanNode) -> dict[str, str | None]:
    groups: dict[str, str | None] = {g: None for g in node.recipe.groups()}
    for name in node.variations:
        spec = node.recipe.variations.get(name) or node.recipe.variations.get(f"{name}.#")
        if spec is not None and spec.group:
            groups[spec.group] = name
    return groups
