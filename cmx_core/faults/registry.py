"""The injectors by fault kind, and ``--inject FAULT[@WHEN]``'s parse and check (docs/faults.md).

:data:`INJECTORS` holds the built-in kinds (:data:`cmx_core.faults.kinds.BUILTIN`); a test
may build its own :class:`Injectors` with a scratch kind beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cmx_core.errors import UsageError
from cmx_core.faults.injector import Injector
from cmx_core.faults.kinds import BUILTIN
from cmx_core.providers.recovery import FaultKind, Injection


class Injectors:
    """Injectors by kind, in the order they were registered (the order help and errors list)."""

    def __init__(self, injectors: Iterable[Injector] = ()) -> None:
        self._by_kind: dict[FaultKind, Injector] = {}
        for injector in injectors:
            self.register(injector)

    def register(self, injector: Injector) -> None:
        if injector.kind in self._by_kind:
            raise ValueError(f"fault {injector.kind!s} is registered twice")
        self._by_kind[injector.kind] = injector

    def unregister(self, kind: FaultKind) -> None:
        """Take ``kind`` out again (a test's scratch injector)."""
        del self._by_kind[kind]

    @property
    def kinds(self) -> tuple[FaultKind, ...]:
        """Every kind ``--inject`` takes."""
        return tuple(self._by_kind)

    @property
    def step_kinds(self) -> tuple[FaultKind, ...]:
        """The kinds the steps' engine arms (a cluster executor's far side applies them)."""
        return tuple(kind for kind, injector in self._by_kind.items() if not injector.by_executor)

    def get(self, kind: FaultKind) -> Injector:
        return self._by_kind[kind]

    def parse(self, text: str) -> Injection:
        """``FAULT[@WHEN]`` as an :class:`Injection`; a one-line UsageError naming what is wrong."""
        fault, _, when = text.strip().partition("@")
        injector = self._by_kind.get(FaultKind(fault))
        if injector is None:
            raise UsageError(f"--inject {text!r}: unknown fault {fault!r}; use one of {', '.join(self._by_kind)}")
        return injector.parse(text, when)

    def check(self, injections: Sequence[Injection], executor: str, own: frozenset[FaultKind] = frozenset()) -> None:
        """Refuse faults the executor cannot inject (before anything runs); ``own``: those the
        executor injects itself (``kill-worker`` on a cluster executor)."""
        for injection in injections:
            if injection.fault not in own:
                self.get(injection.fault).check(injection, executor)


INJECTORS = Injectors(BUILTIN)
"""The built-in fault kinds."""


def parse_injection(text: str) -> Injection:
    """``FAULT[@WHEN]`` as an :class:`Injection`, by the built-in injectors."""
    return INJECTORS.parse(text)


def check_injections(injections: Sequence[Injection], executor: str, own: frozenset[FaultKind] = frozenset()) -> None:
    """:meth:`Injectors.check` by the built-in injectors."""
    INJECTORS.check(injections, executor, own)
