"""Two runs' conditions compared against their bounds (for issue 43 item 4's verdicts):
one side beyond a bound and the other not, or another thread setting, is a difference
named with both values; two quiet records, or an unknown side, are not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cmx_core.conditions.compare import differences
from cmx_core.conditions.record import Conditions
from cmx_core.conditions.snapshot import take
from cmx_core.conditions.values import known, unknown
from cmx_core.conditions.window import conditions

QUIET = Path(__file__).parent / "fixtures" / "conditions" / "quiet"


def _record(outside: float, omp: str = "2") -> Conditions:
    base = conditions(QUIET, (0, 1), take(QUIET, (0, 1)), take(QUIET, (0, 1)), {"OMP_NUM_THREADS": omp})
    return replace(base, window_s=3.0, outside_cores=known(outside))


def test_other_load_at_one_side_only_is_named_with_both_values() -> None:
    assert differences(_record(1.4), _record(0.1)) == ("other load 1.4 cores at record, 0.1 cores at replay",)


def test_alike_records_have_no_difference() -> None:
    assert differences(_record(0.1), _record(0.3)) == ()  # both within 0.25 of 2 CPUs
    assert differences(_record(1.5), _record(1.9)) == ()  # both loaded: like with like


def test_thread_settings_that_differ_are_a_difference() -> None:
    assert differences(_record(0.1, "2"), _record(0.1, "1"), ("baseline", "run")) == (
        "OMP_NUM_THREADS 2 at baseline, 1 at run",)


def test_an_unknown_side_is_not_compared() -> None:
    loaded = _record(1.4)
    blind = replace(_record(0.0), outside_cores=unknown("/proc/stat: unreadable"))
    assert differences(loaded, blind) == ()
    assert differences(loaded, _record(0.0)) != ()
