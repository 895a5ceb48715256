"""A user's script on several nodes (#45): each node's ranks report into that node's own
``reports/`` folder (:mod:`cmx_train.report`), and node 0 needs every rank's lines.

Node 0's step hosts a ``torch.distributed.TCPStore`` on ``master_port + 2`` (torchrun's c10d
rendezvous has ``master_port + 1``) from before its launch until it has every rank's report;
the step on each other node, once its launch ended, puts the report of each rank it ran under
``rank-<R>`` (torchrun's c10d rendezvous may give any node any ranks, so a node sends the
ranks it finds, not the ones its node rank suggests). Node 0 waits at most ``wait_s`` for the
ranks it lacks, then writes them beside its own and reads every rank as on one node. No
directory shared by the nodes is needed; the store is torch's own, as the ranks' rendezvous.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from cmx_core.errors import StepFailed

PORT_OFFSET = 2
"""The hub's port above ``master_port`` (the c10d rendezvous is at ``master_port + 1``)."""


def _store(host: str, port: int, master: bool, wait_s: float) -> Any:
    from torch.distributed import TCPStore  # deferred: torch only on a multi-node script run

    return TCPStore(host, port, is_master=master, wait_for_workers=False, timeout=timedelta(seconds=wait_s))


class ReportHub:
    """Node 0's side: the store, open before the launch so no node finds it missing."""

    def __init__(self, host: str, port: int, wait_s: float) -> None:
        self.port = port + PORT_OFFSET
        self.wait_s = wait_s
        try:
            self._store = _store(host, self.port, True, wait_s)
        except (RuntimeError, OSError) as exc:
            raise StepFailed(f"train: node 0 cannot host the ranks' reports on port {self.port} "
                             f"(master_port + {PORT_OFFSET}): {exc}; pick another master_port") from None

    def collect(self, folder: Path, world_size: int) -> None:
        """Every rank's report in ``folder``: the ones this node ran are there; wait for the rest."""
        missing = [r for r in range(world_size) if not (folder / f"rank-{r}.jsonl").is_file()]
        if not missing:
            return
        try:
            self._store.wait([f"rank-{r}" for r in missing], timedelta(seconds=self.wait_s))
        except RuntimeError as exc:
            sent = [r for r in missing if self._store.check([f"rank-{r}"])]
            lost = [r for r in missing if r not in sent]
            raise StepFailed(f"train: the nodes sent no report of rank {', '.join(map(str, lost))} to node 0 within "
                             f"{self.wait_s:g} s (rdzv_timeout_s): did their launch fail? ({_first_line(exc)})"
                             ) from None
        for rank in missing:
            (folder / f"rank-{rank}.jsonl").write_bytes(self._store.get(f"rank-{rank}"))


def send_reports(host: str, port: int, folder: Path, wait_s: float) -> list[int]:
    """A node other than 0: every rank report in ``folder`` to node 0's hub; the ranks sent."""
    ranks = sorted(int(p.stem.split("-", 1)[1]) for p in folder.glob("rank-*.jsonl"))
    try:
        store = _store(host, port + PORT_OFFSET, False, wait_s)
        for rank in ranks:
            store.set(f"rank-{rank}", (folder / f"rank-{rank}.jsonl").read_bytes())
    except (RuntimeError, OSError) as exc:
        raise StepFailed(f"train: cannot send this node's rank reports to node 0 at {host}:{port + PORT_OFFSET}: "
                         f"{_first_line(exc)}") from None
    return ranks


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
