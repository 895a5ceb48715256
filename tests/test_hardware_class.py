"""hardware_class: the fingerprint that separates the H100 and L4 fixtures and is in every result."""

from __future__ import annotations

import json
from pathlib import Path

from cmx_core.results.facts_map import system_section
from cmx_core.results.hardware import from_system, of_document

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"


def _class_of(name: str):  # type: ignore[no-untyped-def]
    facts = json.loads((FACTS / f"{name}.json").read_text())["facts"]
    return from_system(system_section(facts))


def test_h100_and_l4_fixtures_are_different_classes() -> None:
    h100, l4 = _class_of("h100-sxm-8x"), _class_of("l4-1x")
    assert h100.id != l4.id
    assert (h100.accelerator, h100.accelerator_count, h100.interconnect, h100.driver_branch) == (
        "h100", 8, "nvlink", "550")
    assert (l4.accelerator, l4.accelerator_count, l4.interconnect, l4.driver_branch) == ("l4", 1, "pcie", "535")
    fields = {d.split(" ", 1)[0] for d in h100.differences(l4)}
    assert {"accelerator", "accelerator_count", "interconnect", "driver_branch", "cpu_model"} <= fields


def test_same_hardware_different_host_is_one_class() -> None:
    facts = json.loads((FACTS / "h100-sxm-8x.json").read_text())["facts"]
    a = system_section(facts)
    b = {**a, "name": "another-host", "cpu": {**a["cpu"], "frequency_mhz": 1234.0}}
    b["accelerator"] = {**a["accelerator"], "driver_version": "550.90.07"}  # same branch
    assert from_system(a).id == from_system(b).id
    b["accelerator"] = {**a["accelerator"], "driver_version": "560.28.03"}
    assert from_system(a).id != from_system(b).id


def test_no_accelerator_and_partial_system() -> None:
    cls = from_system({"cpu": {"model": "AMD EPYC", "core_count": 2}, "memory": {"capacity_bytes": 3 << 30},
                       "accelerator": None})
    assert (cls.accelerator, cls.accelerator_count, cls.cpu_cores, cls.memory_gib) == (None, 0, 2, 3)
    assert "no accelerator" in cls.label
    assert from_system({}).cpu_model is None


def test_every_result_records_it(cmx_home: Path) -> None:
    """A run here records this machine's class, the one its own detected facts give (a run
    here with another machine's --facts is refused: tests/test_facts_here.py)."""
    from cmx_core.run import engine

    result = engine.run_tags(["demo", "sort"], {"size": 5, "repeats": 1})
    recorded = result.document["system"]["hardware_class"]
    here = from_system(system_section(engine.detect_facts()))
    assert recorded["id"] == here.id == of_document(result.document).id
    assert recorded["label"] == here.label
