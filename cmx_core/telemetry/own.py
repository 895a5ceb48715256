"""cmx's own memory during a soak, told apart from the workload's.

A Python step runs inside cmx's process, so the process tree's RSS holds both what the step
keeps and what cmx keeps across repetitions. What cmx keeps is its sampler's state (the
window of recent rounds, the running summaries, the series index and the lines not yet
spooled, the application series' latest values) and the soak's record of its repetitions:
:func:`deep_size` sums the sizes of those Python objects (``sys.getsizeof``, each object
once), which costs microseconds, not a trace of every allocation (``tracemalloc`` made a
repetition seconds slower). The soak judges the tree's RSS less this (:mod:`.soak`) and
reports this apart; it does not hold what the rest of cmx allocates (the interpreter, the
engine's modules), which a steady step's soak shows flat (tests/test_telemetry_soak.py).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable
from typing import Any

_LEAVES = (str, bytes, bytearray, int, float, bool, type(None))


def deep_size(*roots: Any) -> int:
    """The bytes of ``roots`` and every object they hold (containers, dataclasses, plain
    objects' ``__dict__`` and ``__slots__``), each object counted once; modules, classes and
    functions are left out (they are not state)."""
    seen: set[int] = set()
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or (callable(obj) and not hasattr(obj, "__dict__")):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, _LEAVES):
            continue
        stack.extend(_held(obj))
    return total


def _held(obj: Any) -> Iterable[Any]:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set, frozenset, deque)):
        return list(obj)
    held: list[Any] = []
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        held.append(vars(obj))
    for name in getattr(type(obj), "__slots__", ()):
        if hasattr(obj, name):
            held.append(getattr(obj, name))
    return held
