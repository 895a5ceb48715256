"""A multi-node run on Ray: a plan asking for ``nodes: N`` runs as N far tasks, one per node,
held together by a placement group whose ``STRICT_SPREAD`` strategy puts each bundle on a
node of its own (torchrun on Ray nodes, rather than Ray Train: the recipe's launcher stays the
one that starts the ranks, as under Slurm and Kubernetes).

Each task's far run is told its node rank and where node 0 is, in the variables a multi-node
launcher reads and the k8s executor sets too (``CMX_NODE_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``, ``CMX_JOB_ID``, ``CMX_NNODES``). Node 0's run is the run: its result comes
back; the other nodes' runs end with it, and one that fails first ends the run with its error.
Ray does not run a node's task again on its own (``max_retries=0``): the other nodes' ranks
are gone with it, so the run is retried whole by cmx's policy, as on Slurm."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmx_core.api import CmxError, JobStatus
from cmx_ray import cluster
from cmx_ray.resources import TaskResources

PLACE_TIMEOUT_S = 120.0
"""How long the placement group may wait for N nodes with room before the run is refused."""
PORT_BASE, PORT_SPAN = 20000, 10000
"""``MASTER_PORT`` is drawn from the run's token in this range (as the Slurm executor derives
it from the job id); torchrun's c10d rendezvous listens on the port after it."""


@dataclass
class NodeSet:
    """The placement group of a multi-node run and the tasks of nodes 1..N-1 (node 0's is
    the handle's own ``ref``)."""

    group: Any
    master_addr: str
    master_port: int
    peers: list[Any] = field(default_factory=list)
    released: bool = False


def master_port(token: str) -> int:
    return PORT_BASE + int(hashlib.sha256(token.encode()).hexdigest(), 16) % PORT_SPAN


def place(resources: TaskResources, token: str, timeout_s: float = PLACE_TIMEOUT_S) -> NodeSet:
    """Reserve one bundle on each of ``resources.nodes`` nodes; node 0 is the first bundle's
    node, whose address every node's ranks meet at. A CmxError when the cluster cannot give
    that many nodes within ``timeout_s`` (the group is removed)."""
    import ray  # deferred: ray only when this runs (513 modules)
    from ray.util.placement_group import (  # deferred: ray only when this runs (513 modules)
        placement_group,
        placement_group_table,
        remove_placement_group,
    )

    each = resources.needs()  # one bundle: what each node's task asks for
    group = placement_group([each] * resources.nodes, strategy="STRICT_SPREAD")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(group)
        raise CmxError(f"ray executor: the cluster gave no {resources.nodes} separate nodes with "
                       f"{', '.join(f'{v:g} {k}' for k, v in each.items())} free each within {timeout_s:g} s (a "
                       f"multi-node run puts one task on each node); add nodes or ask for fewer (nodes.N)")
    node = placement_group_table(group)["bundles_to_node_id"][0]
    address = next(str(n["NodeManagerAddress"]) for n in ray.nodes()  # type: ignore[no-untyped-call]
                   if n["NodeID"] == node)
    return NodeSet(group, address, master_port(token))


def node_env(nodes: NodeSet, rank: int, count: int, job_id: str) -> dict[str, str]:
    """What node ``rank``'s far run is told (the variables of :mod:`cmx_train.launch`'s layout)."""
    return {"CMX_NODE_RANK": str(rank), "CMX_NNODES": str(count), "MASTER_ADDR": nodes.master_addr,
            "MASTER_PORT": str(nodes.master_port), "CMX_JOB_ID": job_id}


def strategy(nodes: NodeSet, rank: int) -> dict[str, Any]:
    """The task option that puts node ``rank``'s task on its bundle."""
    from ray.util.scheduling_strategies import (  # deferred: ray only when this runs (513 modules)
        PlacementGroupSchedulingStrategy,
    )

    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(nodes.group, placement_group_bundle_index=rank)}


def release(nodes: NodeSet) -> None:
    """Cancel what still runs of the other nodes' tasks and remove the placement group (once)."""
    import ray  # deferred: ray only when this runs (513 modules)
    from ray.util.placement_group import remove_placement_group  # deferred: ray only when this runs

    if nodes.released:
        return
    nodes.released = True
    for ref in nodes.peers:
        ray.cancel(ref, force=True)
    remove_placement_group(nodes.group)


def failed_peer(nodes: NodeSet) -> JobStatus | None:
    """How another node's task that already ended without success ended: ``lost`` when its
    worker or node died (a lost node, which a policy naming ``node_lost`` retries), else
    ``failed`` with its run's error; None while none has."""
    import ray  # deferred: ray only when this runs (513 modules)
    from ray import exceptions  # deferred: ray only when this runs (513 modules)

    ready, _ = ray.wait(nodes.peers, num_returns=len(nodes.peers), timeout=0)
    for ref in ready:
        rank = nodes.peers.index(ref) + 1
        try:
            result = ray.get(ref)
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.ObjectLostError) as exc:
            return JobStatus("lost", None, f"node {rank}'s task was lost: {cluster.first_line(exc)}")
        except Exception as exc:  # noqa: BLE001 - any other Ray error of the task is the node's failure
            return JobStatus("failed", None, f"node {rank}'s task failed: {cluster.first_line(exc)}")
        if result.exit_code != 0 or result.error:
            return JobStatus("failed", result.exit_code or None,
                             f"node {rank}'s run failed: {result.error or f'its far cmx exited {result.exit_code}'}")
    return None


def identities(nodes: NodeSet, timeout_s: float) -> list[Mapping[str, str]]:
    """Where the other nodes' runs ran, for the run's record (waited for ``timeout_s`` at most)."""
    import ray  # deferred: ray only when this runs (513 modules)

    ready, _ = ray.wait(nodes.peers, num_returns=len(nodes.peers), timeout=timeout_s)
    found: list[Mapping[str, str]] = []
    for ref in ready:
        try:
            found.append(dict(ray.get(ref).node))
        except Exception:  # noqa: BLE001 - a peer that failed has no identity to record
            found.append({})
    return found

