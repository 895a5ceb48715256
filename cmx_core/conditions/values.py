"""A probe's answer: a typed value, or unknown with the reason (never a guess)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Read(Generic[T]):
    """``value`` when the source was read; else ``why`` says why it is unknown."""

    value: T | None = None
    why: str | None = None

    @property
    def known(self) -> bool:
        return self.why is None

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value} if self.why is None else {"unknown": self.why}

    def map(self, fn: Callable[[T], U]) -> Read[U]:
        """The value transformed; an unknown stays unknown with its reason."""
        return Read(fn(self.value)) if self.why is None and self.value is not None else Read(why=self.why)


def known(value: T) -> Read[T]:
    return Read(value)


def unknown(why: str) -> Read[Any]:
    return Read(why=why)


def from_json(data: Mapping[str, Any] | None) -> Read[Any]:
    """The inverse of :meth:`Read.to_json` (a missing entry: unknown, "not recorded")."""
    if not isinstance(data, Mapping):
        return unknown("not recorded")
    if "unknown" in data:
        return unknown(str(data["unknown"]))
    return known(data.get("value"))
