"""``Limits.cpus``: CPUs come from the allowed set, in turn, so concurrent sandboxes spread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cmx_core.sandbox.cpus import COUNTER, pick_cpus


def test_cpus_are_taken_in_turn_from_the_allowed_set(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to spread over")
    picks = [pick_cpus(1, tmp_path) for _ in range(len(allowed))]
    assert sorted(cpu for pick in picks for cpu in pick) == allowed  # each CPU once in a round
    assert pick_cpus(1, tmp_path) == picks[0]  # then round again
    assert (tmp_path / COUNTER).read_text() == str(len(allowed) + 1)


def test_only_cpus_this_process_may_use_are_picked(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: no narrower set to pin to")
    pid = os.fork()
    if pid == 0:  # a child pinned to the last CPU: every pick must be that CPU
        try:
            os.sched_setaffinity(0, {allowed[-1]})
            ok = all(pick_cpus(1, tmp_path) == [allowed[-1]] for _ in range(4))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_asking_for_as_many_as_allowed_gives_them_all(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert pick_cpus(len(allowed), tmp_path) == allowed
    assert pick_cpus(len(allowed) + 3, tmp_path) == allowed


def test_a_garbled_counter_starts_again_from_zero(tmp_path: Path) -> None:
    (tmp_path / COUNTER).write_text("not a number")
    assert pick_cpus(1, tmp_path) == [sorted(os.sched_getaffinity(0))[0]]
