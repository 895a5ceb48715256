"""Run untrusted code confined: no network, read-only inputs, hidden answers, a private work
dir, limits on time, memory, processes and output, a non-root user, a typed verdict.

The contract (:class:`SandboxSpec`, :class:`Limits`, :class:`SandboxResult`,
:class:`Verdict`, the :class:`Sandbox` protocol and the :class:`SandboxBackend` a plugin
registers with ``cmx_register_sandboxes``) lives here so suites and backends depend only
on cmx-core. The built-in backend is :class:`BubblewrapSandbox`; see ``docs/sandbox.md``.
"""

from __future__ import annotations

from cmx_core.sandbox.backend import DEFAULT_BACKEND, Sandbox, SandboxBackend, pick_backend
from cmx_core.sandbox.result import SandboxResult, Verdict
from cmx_core.sandbox.spec import NOBODY, Limits, SandboxSpec, SandboxUser, check_spec

__all__ = [
    "DEFAULT_BACKEND", "NOBODY", "Limits", "Sandbox", "SandboxBackend", "SandboxResult", "SandboxSpec", "SandboxUser",
    "Verdict", "check_spec", "pick_backend", "BUILTIN",
]


def _bubblewrap() -> Sandbox:
    # deferred: every process that loads the plugin registry imports this package; bubblewrap pulls filelock
    from cmx_core.sandbox.bubblewrap import BubblewrapSandbox

    return BubblewrapSandbox()


BUILTIN = (SandboxBackend(name="bubblewrap", summary="Linux namespaces via bwrap; cgroup v1 or rlimit limits",
                          create=_bubblewrap),)
"""The backends cmx-core has without a plugin."""
