"""A checked plan handed from ``cmx sweep`` to the ``cmx run`` process of one of its points.

The sweep plans and checks every point before anything runs (a bad point stops it, exit 2).
A point run as its own process would otherwise resolve the same plan again there; instead
its ``cmx run --plan-on-stdin`` reads the sweep's plan from its standard input, so each
point is planned once.

The plan travels pickled (``Plan`` holds recipes, steps and facts that have no JSON reader)
over the pipe from the parent ``cmx sweep`` that made it, never through a file: the only
bytes read are the ones cmx's own sweep wrote a moment before, as :mod:`multiprocessing`
hands arguments to its children.
"""

from __future__ import annotations

import pickle
from typing import BinaryIO

from cmx_core.errors import UsageError
from cmx_core.plan.planner import Plan

__all__ = ["FLAG", "plan_bytes", "read_plan"]

FLAG = "--plan-on-stdin"
"""The hidden ``cmx run`` option that reads the plan from standard input."""

_MAX_BYTES = 64 * 1024 * 1024


def plan_bytes(the_plan: Plan) -> bytes:
    """The plan as the bytes a point's ``cmx run`` reads back with :func:`read_plan`."""
    return pickle.dumps(the_plan, protocol=pickle.HIGHEST_PROTOCOL)


def read_plan(stream: BinaryIO) -> Plan:
    """The plan the sweep wrote to ``stream``; anything else is a one-line UsageError (the
    option is cmx sweep's own)."""
    data = stream.read(_MAX_BYTES + 1)
    if not data or len(data) > _MAX_BYTES:
        raise UsageError(f"{FLAG}: no plan on standard input (this option is set by cmx sweep only)")
    try:
        value = pickle.loads(data)  # the parent cmx sweep's pipe (module docstring)
    except Exception:  # noqa: BLE001 - any unpickling failure means the same: not a plan
        raise UsageError(f"{FLAG}: standard input is not a plan written by cmx sweep") from None
    if not isinstance(value, Plan):
        raise UsageError(f"{FLAG}: standard input is not a plan written by cmx sweep")
    return value
