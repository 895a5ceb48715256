"""Connecting to Ray: a given cluster (kept connected for later runs in this process), or a
private local cluster started for one run and stopped after it.

The private cluster cmx starts needs three variables on these machines (docs/infra: every
listener on 127.0.0.1, no token auth written by an in-process ``ray.init``, no usage
reporting). They are set only while cmx starts and uses that cluster, and restored after,
never globally. A cluster given by its address is one a user started with ``ray start``:
the driver then runs in the environment cmx was started in, the one that cluster was
started in, and sets none of Ray's variables (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in a
driver makes it look for its node on 127.0.0.1, where an ordinary ``ray start`` head is
not, and fail after a minute; the head's own setting must be the driver's).

The private cluster is an in-process ``ray.init(address="local")`` with its own temp dir:
measured cheaper than a head process started and stopped by PID (benchmarks/bench_scale_ray.py
``--private``), and it ends with the run (``ray.shutdown`` stops the processes it started,
nobody else's)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.api import CmxError, UsageError

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class _State:
    address: str | None = None
    """The address this module connected to (None: not connected by us)."""


_STATE = _State()


@contextmanager
def ray_env() -> Iterator[None]:
    """:data:`RAY_ENV` in ``os.environ`` for the block (children started in it inherit it)."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def session(address: str, cluster_cpus: int | None = None) -> Iterator[str]:
    """Ray connected for the block; yields a description of the cluster used: a given
    address (connected once, reused by later runs; Ray's variables as this process has
    them), else a private cluster for the block (with :data:`RAY_ENV`). A Ray the caller
    initialised itself is used as it is (:func:`callers_ray`). Ray reads some of
    :data:`RAY_ENV` when it is imported, so it is imported inside the block."""
    with nullcontext() if address else ray_env():
        import ray  # deferred: ray only when this runs (552 modules)

        cluster_reports_to_stderr()

        if callers_ray():
            yield "the Ray this process already started"
            return
        if ray.is_initialized():
            if address and _STATE.address == address:
                yield address
                return
            disconnect()  # connected by us to another cluster than the one asked for
        if address:
            connect(address)
            yield address
            return
        with private_cluster(cluster_cpus) as where:
            yield where


def cluster_reports_to_stderr() -> None:
    """Ray's driver prints what the cluster publishes to it (a raylet that died, with the last
    lines of its log) on stdout, from a thread of its own, for as long as it stays connected.
    cmx keeps stdout for its one ``--json`` document, so those reports are marked as errors,
    which Ray prints on stderr. There is no public switch for it: Ray's printer is wrapped,
    once per process (ray is pinned in pyproject.toml; the kill-worker tests parse stdout)."""
    from ray._private import worker  # deferred: ray only when this runs (552 modules)

    original = worker.print_to_stdstream
    if getattr(original, "cmx_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.cmx_to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def callers_ray() -> bool:
    """True when this process initialised Ray itself (not through this module): then that
    Ray is used as it is, whatever the address (an in-process ``ray.init`` in tests). Ray is
    not imported here: a process that has not imported it has not initialised it."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized()) and _STATE.address is None


def disconnect() -> None:
    """Drop the connection this module made (nothing when it made none)."""
    import ray  # deferred: ray only when this runs (552 modules)

    if _STATE.address is not None:
        ray.shutdown()
        _STATE.address = None


def connect(address: str) -> None:
    """Connect to ``address`` and stay connected (later runs reuse the connection). Ray finds
    the node of this machine the driver attaches to itself, whatever address the head
    advertises (forcing 127.0.0.1 would miss a head on the machine's own address)."""
    import ray  # deferred: ray only when this runs (552 modules)

    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"ray executor option address={address!r}: cannot connect ({first_line(exc)}); "
                         "give the head's host:port (ray start --head prints it) and run cmx with the RAY_* "
                         "variables the head was started with") from None
    _STATE.address = address


@contextmanager
def private_cluster(cluster_cpus: int | None) -> Iterator[str]:
    """A local Ray started for the block, with a private temp dir, on 127.0.0.1 only."""
    import ray  # deferred: ray only when this runs (552 modules)

    if cluster_cpus is not None and cluster_cpus < 1:
        raise UsageError(f"ray executor option cluster_cpus={cluster_cpus}: use 1 or more")
    temp = Path(tempfile.mkdtemp(prefix="cmx-ray-"))
    try:
        ray.init(address="local", include_dashboard=False, num_cpus=cluster_cpus or os.cpu_count() or 1,
                 _temp_dir=str(temp), _node_ip_address="127.0.0.1", log_to_driver=False,
                 configure_logging=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; the run cannot start
        shutil.rmtree(temp, ignore_errors=True)
        raise CmxError(f"ray executor: cannot start a private local Ray cluster: {first_line(exc)}") from None
    try:
        yield f"a private local cluster ({temp})"
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def cluster_resources() -> Mapping[str, float]:
    import ray  # deferred: ray only when this runs (552 modules)

    return {str(k): float(v) for k, v in ray.cluster_resources().items()}  # type: ignore[no-untyped-call]


def first_line(exc: BaseException) -> str:
    """The first line of a Ray error's text (its class name when empty), for one-line messages."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
