"""No new user namespace inside the sandbox when cmx runs as root (#54).

Without cmx being root, bwrap's ``--unshare-user --disable-userns`` stops a sandboxed program
from making a user namespace (and, inside one, a mount namespace). As root bwrap makes no user
namespace, so that option is not there to give; a seccomp filter does the same job, as Docker's
and Flatpak's do: ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` fail with EPERM, and
``clone3`` (whose flags a filter cannot read) fails with ENOSYS, so the C library falls back to
``clone``. The filter is compiled by libseccomp (through ``pyseccomp``) for this machine's
architecture (a system call of another one kills the process) and handed to ``bwrap --seccomp FD``.
"""

from __future__ import annotations

import errno
import os

CLONE_NEWUSER = 0x10000000


def no_new_userns() -> int | None:
    """A memory file holding the compiled filter, at its start; None where libseccomp or its
    Python binding is missing (the caller records that the hole is open)."""
    try:
        import pyseccomp  # type: ignore[import-untyped]  # deferred: only a root sandbox run needs it (libseccomp)
    except (ImportError, OSError):
        return None
    chosen = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    newuser = pyseccomp.Arg(0, pyseccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    chosen.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare", newuser)
    chosen.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", newuser)
    chosen.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("cmx-seccomp")
    try:
        with os.fdopen(os.dup(fd), "wb") as handle:
            chosen.export_bpf(handle)
        os.lseek(fd, 0, os.SEEK_SET)
    except (OSError, RuntimeError):
        os.close(fd)
        raise
    return fd
