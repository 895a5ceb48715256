"""The sweep runner's helpers, for an executor's sweep tests (re-exported on purpose).

``api.SweepRequest`` and ``api.run_sweep`` run a sweep; a test also needs:

* ``parse_axes``, ``points``: the matrix ``--matrix size=3,4`` means, as ``cmx sweep`` builds it.
* ``SweepResult``: what ``run_sweep`` returns, to type a test's helpers.
* ``read_manifest``: the sweep's manifest on disk (its points and their run ids).
"""

from __future__ import annotations

from cmx_core.sweep.runner import SweepResult, parse_axes, points, read_manifest

__all__ = ["SweepResult", "parse_axes", "points", "read_manifest"]
