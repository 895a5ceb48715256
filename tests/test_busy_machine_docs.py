"""docs/busy-machine.md held to the code: the bounds it states, the section's fields, the
sources `cmx system check` lists, the files, fixtures and tests it names, and README's link."""

from __future__ import annotations

import re
from pathlib import Path

from cmx_core.conditions.check import system_check
from cmx_core.conditions.record import BOUNDS, READS
from cmx_core.conditions.threads import ENV_THREADS
from cmx_core.results.noise import CONFIDENCE
from cmx_core.results.repeats import CV_BOUND, OUTLIER_Z

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "busy-machine.md").read_text()
TREES = ROOT / "tests" / "fixtures" / "conditions"


def test_the_bounds_are_the_codes() -> None:
    judgement = DOC.split("## The noise judgement", 1)[1].split("## Figures", 1)[0]
    assert f"more than {BOUNDS['outside_cores']} of the run's CPUs" in judgement
    assert f"steal above {BOUNDS['steal_cores']:.2f}" in judgement
    assert f"spread above {BOUNDS['freq_spread']:.2f}" in judgement and BOUNDS["cpu_throttle_events"] == 0
    assert f"at least {BOUNDS['min_window_s']} s (`min_window_s`)" in judgement


def test_the_repeats_rules_are_the_codes() -> None:
    section = " ".join(DOC.split("## Repeats", 1)[1].split("## Figures", 1)[0].split()).replace(" %", "%")
    assert f"z-score above {OUTLIER_Z}" in section and f"CV above {CV_BOUND:.0%}" in section
    assert f"{CONFIDENCE:.0%} bootstrap interval of the median" in section


def test_every_field_of_the_section_is_documented() -> None:
    table = DOC.split("## What a run records", 1)[1].split("## The noise judgement", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", table))
    assert set(READS) <= named and {"threads", "bounds", "warnings"} <= named
    assert all(f"`{name}`" in table for name in ENV_THREADS)


def test_the_system_check_sources_are_listed() -> None:
    section = " ".join(DOC.split("## `cmx system check`", 1)[1].split())
    names = {s.name for s in system_check(TREES / "throttling", {})}
    for name in names:
        generic = re.sub(r"^gpu\d+ ", "", name)
        assert generic in section or name in ENV_THREADS, name


def test_the_files_fixtures_and_tests_it_names_exist() -> None:
    for path in re.findall(r"`((?:cmx_core|tests|benchmarks)/[\w/.-]+)`", DOC):
        assert (ROOT / path).exists(), path
    trees = re.search(r"`tests/fixtures/conditions/` \(([^)]*)\)", DOC)
    assert trees is not None
    named = re.findall(r"`([\w-]+)`", trees.group(1))
    assert set(named) == {p.name for p in TREES.iterdir() if p.is_dir()}


def test_the_figures_table_is_whole_and_readme_links_the_page() -> None:
    rows = re.findall(r"^\| (\d) \| ([\d.]+) of 2 \| ([\d.]+) \| (yes|no) \|$", DOC, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert "(docs/busy-machine.md)" in (ROOT / "README.md").read_text()
