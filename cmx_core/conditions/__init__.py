"""The conditions a measurement ran under (issue 43): what the machine was doing besides the
run, how its CPUs were clocked and throttled, and the thread settings of the workload; the
noise judgement drawn from them; and ``cmx system check``'s rows (docs/busy-machine.md).

Every probe reads below a root path (default ``/``) so that tests read recorded
sysfs/procfs trees, and every source that cannot be read is recorded as unknown with the
reason, never guessed (:class:`~cmx_core.conditions.values.Read`).
"""
