"""The parts of cmx-core's sandbox that a sandbox backend or a judge reuses (docs/sandbox.md):
checking a :class:`~cmx_core.api.SandboxSpec` (``check_spec``), how a confined run ended
and the verdict it earns (``Ending``, ``decide``: cmx-docker's container backend), a
long-lived bubblewrap session and the CPUs to pin it to (``BubblewrapSession``,
``session_unavailable``, ``pick_cpus``: ALE-Bench's judge, which runs many test cases in one),
and the memory cgroup of a process a step starts, whose OOM kills are the step's own evidence
(``open_group``: cmx-train's launch of its ranks), the run's ``--inject`` faults armed on
such a process (``strike``: kill-step kills it at its moment, as a shell step's), and the work
dir's size-bounded tmpfs mounted on the host for a sandbox an engine starts (``HostWorkFs``,
``host_work_unavailable``: cmx-docker's containers).

Not the plugin contract (:mod:`cmx_core.api`, whose sandbox names are what a suite that runs
untrusted code needs): internals a backend shares so that every backend decides alike.
"""

from __future__ import annotations

from cmx_core.faults.armed import strike as strike
from cmx_core.sandbox import check_spec as check_spec
from cmx_core.sandbox.cpus import pick_cpus as pick_cpus
from cmx_core.sandbox.hostwork import HostWorkFs as HostWorkFs
from cmx_core.sandbox.hostwork import host_work_unavailable as host_work_unavailable
from cmx_core.sandbox.session import BubblewrapSession as BubblewrapSession
from cmx_core.sandbox.session import session_unavailable as session_unavailable
from cmx_core.sandbox.step_group import open_group as open_group
from cmx_core.sandbox.verdict import Ending as Ending
from cmx_core.sandbox.verdict import decide as decide
