"""What a run on several nodes leaves on the wrong node, brought to node 0 (#45).

Two files may be written on a node other than node 0: a user's script's rank reports (each
node's ranks report into that node's own ``reports/``, :mod:`cmx_train.report`) and a
time-to-accuracy run's MLPerf log (written by global rank 0, which torchrun's c10d rendezvous
may give to any node). Node 0's step hosts a ``torch.distributed.TCPStore`` on ``master_port
+ 2`` (the c10d rendezvous has ``master_port + 1``) from before its launch until it has what
it lacks; the step on each other node, once its launch ended, puts every such file it holds
under its name. Node 0 waits at most ``wait_s`` for the files it lacks, then writes them
beside its own. No directory shared by the nodes is needed; the store is torch's own, as the
ranks' rendezvous is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from cmx_core.errors import StepFailed

PORT_OFFSET = 2
"""The hub's port above ``master_port`` (the c10d rendezvous is at ``master_port + 1``)."""


def _store(host: str, port: int, master: bool, wait_s: float) -> Any:
    from torch.distributed import TCPStore  # deferred: torch only on a run of several nodes

    return TCPStore(host, port, is_master=master, wait_for_workers=False, timeout=timedelta(seconds=wait_s))


class FileHub:
    """Node 0's side: the store, open before the launch so no node finds it missing."""

    def __init__(self, host: str, port: int, wait_s: float) -> None:
        self.port = port + PORT_OFFSET
        self.wait_s = wait_s
        try:
            self._store = _store(host, self.port, True, wait_s)
        except (RuntimeError, OSError) as exc:
            raise StepFailed(f"train: node 0 cannot take the other nodes' files on port {self.port} "
                             f"(master_port + {PORT_OFFSET}): {_first_line(exc)}; pick another master_port") from None

    def collect(self, folder: Path, names: Sequence[str]) -> None:
        """Each of ``names`` (paths under ``folder``) that this node lacks, from the others."""
        missing = [name for name in names if not (folder / name).is_file()]
        if not missing:
            return
        try:
            self._store.wait(missing, timedelta(seconds=self.wait_s))
        except RuntimeError as exc:
            lost = [name for name in missing if not self._store.check([name])]
            raise StepFailed(f"train: no node sent {', '.join(lost)} to node 0 within {self.wait_s:g} s "
                             f"(rdzv_timeout_s): did their launch fail? ({_first_line(exc)})") from None
        for name in missing:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(self._store.get(name))


def send_files(host: str, port: int, folder: Path, names: Sequence[str], wait_s: float) -> list[str]:
    """A node other than 0: each of ``names`` it holds to node 0's hub; the names sent."""
    held = [name for name in names if (folder / name).is_file()]
    if not held:
        return held
    try:
        store = _store(host, port + PORT_OFFSET, False, wait_s)
        for name in held:
            store.set(name, (folder / name).read_bytes())
    except (RuntimeError, OSError) as exc:
        raise StepFailed(f"train: cannot send {', '.join(held)} to node 0 at {host}:{port + PORT_OFFSET}: "
                         f"{_first_line(exc)}") from None
    return held


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
