"""The text of one live progress line: the phase (node, step and its type), the elapsed time,
the step's own series (what it reported on the application channel, docs/telemetry.md) and,
while telemetry samples the run, its CPU and memory::

    cmx: llama/step0 (mlperf.loadgen) 12.0 s: completed_queries 120, live_qps 9.87 | cpu 1.93 cores, rss 812 MiB
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cmx_core.telemetry.appmetrics import AppValue
from cmx_core.telemetry.collector import Usage
from cmx_core.telemetry.live import RunningStep

MAX_SERIES = 6
"""At most this many of a step's series on its line (by name); the rest are in telemetry.om."""


def number(value: float) -> str:
    """A whole number without decimals, else three significant digits at least."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return f"{int(value):d}"
    return f"{value:.2f}" if 1 <= abs(value) < 1e6 else f"{value:.3g}"


def usage_text(usage: Usage | None) -> str:
    if usage is None:
        return ""
    parts = []
    if usage.cpu_cores is not None:
        parts.append(f"cpu {usage.cpu_cores:.2f} cores")
    if usage.rss_bytes is not None:
        parts.append(f"rss {usage.rss_bytes / 2**20:.0f} MiB")
    return ", ".join(parts)


def step_line(step: RunningStep, now: float, reported: Sequence[AppValue], usage: Usage | None) -> str:
    """``now`` is ``time.monotonic()``."""
    shown = [f"{v.name}{_labels(v)} {number(v.value)}" for v in reported[:MAX_SERIES]]
    if len(reported) > MAX_SERIES:
        shown.append(f"+{len(reported) - MAX_SERIES} more")
    own = ", ".join(shown)
    machine = usage_text(usage)
    detail = " | ".join(part for part in (own, machine) if part)
    head = f"{step.key} ({step.uses}) {now - step.started:.1f} s"
    return f"{head}: {detail}" if detail else head


def node_line(node_id: str, recipe: str, elapsed_s: float, usage: Usage | None) -> str:
    """A node running where no step of it is on this process's board (a remote executor)."""
    machine = usage_text(usage)
    head = f"{node_id} ({recipe}) {elapsed_s:.1f} s"
    return f"{head}: {machine}" if machine else head


def _labels(value: AppValue) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in value.labels) + "}" if value.labels else ""
