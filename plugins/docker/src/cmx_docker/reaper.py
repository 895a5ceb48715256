"""Remove the containers whose owning cmx process is gone (SIGKILL, a crash, a reboot).

A container is removed by the process that created it once it ends (:mod:`cmx_docker.job`);
only a killed process leaves one behind. Every docker executor and sandbox run first calls
:func:`reap`, so the next start of cmx removes what a killed one left, running or not.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from cmx_docker import owner
from cmx_docker.engine import Endpoint, sdk_client


def reap(endpoint: Endpoint) -> list[str]:
    """Force-remove this host's ``org.cmx.owner-*`` containers whose owner is gone; returns
    their names."""
    import docker.errors  # deferred: docker only when this runs (236 modules)

    client = sdk_client(endpoint, timeout=60)
    removed: list[str] = []
    try:
        for container in _labelled(client):
            if not owner.owner_gone(container.labels):
                continue
            with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile: fine
                container.remove(force=True)
                removed.append(str(container.name))
    finally:
        client.close()
    if removed:
        print(f"cmx-docker: removed {len(removed)} container(s) left by a cmx process that is gone: "
              f"{', '.join(removed)}", file=sys.stderr)
    return removed


def _labelled(client: Any) -> list[Any]:
    """cmx's containers; one another cmx removes between the listing and its inspection (its
    run just ended) is left out, not an error that would stop this run's start."""
    return list(client.containers.list(all=True, filters={"label": owner.PID}, ignore_removed=True))
