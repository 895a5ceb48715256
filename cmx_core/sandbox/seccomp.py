"""The seccomp filter every sandboxed program runs under (#54), handed to ``bwrap --seccomp FD``.

* **No new user namespace, as root.** Without cmx being root, bwrap's ``--unshare-user
  --disable-userns`` stops a sandboxed program from making a user namespace (and, inside one, a
  mount namespace). As root bwrap makes no user namespace, so that option is not there to give;
  the filter does the same job, as Docker's and Flatpak's do: ``unshare`` and ``clone`` with
  ``CLONE_NEWUSER`` fail with EPERM, and ``clone3`` (whose flags a filter cannot read) fails with
  ENOSYS, so the C library falls back to ``clone``.
* **SIGXFSZ cannot be ignored or caught, root or not.** A write past the file-size bound
  (RLIMIT_FSIZE) sends SIGXFSZ; a program that ignores it (Python does at start-up) gets EFBIG
  instead, and may delete the capped file and exit 0, leaving no trace of the limit it hit.
  ``rt_sigaction(SIGXFSZ, act)`` with an ``act`` fails with EINVAL, so the signal keeps its
  default action and the kernel ends the program with it, which the supervisor sees
  (``output_limit``). Python's start-up ignores the failure. A program that *blocks* SIGXFSZ
  (``sigprocmask``, whose mask a filter cannot read) still gets EFBIG: that gap is documented.

The filter is compiled by libseccomp (through ``pyseccomp``) for this machine's architecture (a
system call of another one kills the process).
"""

from __future__ import annotations

import errno
import os
import signal

CLONE_NEWUSER = 0x10000000


def program_filter(as_root: bool) -> int | None:
    """A memory file holding the compiled filter, at its start: the SIGXFSZ rule, and as root
    the user namespace rules; None where libseccomp or its Python binding is missing (the
    caller records which holes are open)."""
    try:
        import pyseccomp  # type: ignore[import-untyped]  # deferred: only a sandbox run needs it (libseccomp)
    except (ImportError, OSError):
        return None
    chosen = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    if as_root:
        newuser = pyseccomp.Arg(0, pyseccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
        chosen.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare", newuser)
        chosen.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", newuser)
        chosen.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    chosen.add_rule(pyseccomp.ERRNO(errno.EINVAL), "rt_sigaction", pyseccomp.Arg(0, pyseccomp.EQ, signal.SIGXFSZ),
                    pyseccomp.Arg(1, pyseccomp.NE, 0))
    fd = os.memfd_create("cmx-seccomp")
    try:
        with os.fdopen(os.dup(fd), "wb") as handle:
            chosen.export_bpf(handle)
        os.lseek(fd, 0, os.SEEK_SET)
    except (OSError, RuntimeError):
        os.close(fd)
        raise
    return fd
