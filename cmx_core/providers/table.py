"""Providers of one kind by name, with where to get a missing one (a module of its own and
import-light: the result checks of a warm replay use it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


class ProviderTable(dict[str, T]):
    """Providers of one kind by name, as a registry hands them to a lower layer (the fact
    store, the result checks), together with where to get one that is missing:
    ``missing_hint(name)`` is one clause such as ``plugin cmx-helm provides it: cmx plugins
    install cmx-helm``, or ``""``. A plain mapping works wherever a table does (no hint)."""

    def __init__(self, providers: Mapping[str, T], missing_hint: Callable[[str], str]) -> None:
        super().__init__(providers)
        self.missing_hint = missing_hint
