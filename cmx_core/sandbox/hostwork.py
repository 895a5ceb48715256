"""The work dir's total bound for a sandbox that another program starts (a container engine).

bubblewrap mounts the work tmpfs inside its own mount namespace (:mod:`.workfs`); a container
engine binds host paths. So, as root, the tmpfs of ``Limits.work_bytes`` is mounted on the
host, at a fresh directory of its own, filled from the host's work dir, and handed to the
engine as the work dir's bind source. Once the container has started, the engine's bind holds
the file system, so the host's mount is detached at once (``umount -l``): from then on
nothing on the host's mount table points at it, cmx keeps it open through a directory
descriptor alone, and a cmx killed mid-run leaves no mount behind (the tmpfs goes with the
container). Fullness, what comes back and what is dropped are :class:`~.workfs.WorkFs`'s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cmx_core.sandbox.workfs import WorkFs, check_fits

MOUNT_TIMEOUT_S = 30.0


def mount_source() -> str:
    """The name the tmpfs shows in the mount table: this process's own, so its leftovers can be told apart."""
    return f"cmx-work-{os.getpid()}"


def host_work_unavailable() -> str | None:
    """None where a host tmpfs can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "mounting the work dir's tmpfs on the host needs root"
    if not (shutil.which("mount") and shutil.which("umount")):
        return "mount and umount (util-linux) are needed to bound the work dir"
    return None


class HostWorkFs(WorkFs):
    """A tmpfs of ``bound`` bytes on the host, filled from ``host``, brought back to it."""

    def __init__(self, host: Path, bound: int, keep: int | None) -> None:
        super().__init__(host, (), bound, keep)
        self.point: Path | None = None

    def mount(self, uid: int | None) -> Path:
        """Mount and fill the tmpfs; the directory to bind at the work path. A UsageError
        where the work dir already holds more than the bound."""
        check_fits(self.host, self.bound)
        point = Path(tempfile.mkdtemp(prefix="cmx-work-"))
        try:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.bound},mode=0700,nosuid,nodev",
                            mount_source(), str(point)], check=True, capture_output=True, timeout=MOUNT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            point.rmdir()
            raise OSError(f"could not mount the work dir's {self.bound} byte tmpfs at {point}: {exc}") from exc
        self.point = point
        try:
            self.fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
            self._copy_in(str(point), uid)
        except BaseException:
            self.close()
            raise
        return point

    def detach(self) -> None:
        """Take the tmpfs off the host's mount table (it stays open here and in the container); idempotent."""
        point, self.point = self.point, None
        if point is None:
            return
        subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True, timeout=MOUNT_TIMEOUT_S)
        try:
            point.rmdir()
        except OSError:
            pass

    def close(self) -> None:
        self.detach()
        super().close()


__all__ = ["HostWorkFs", "host_work_unavailable", "mount_source"]
