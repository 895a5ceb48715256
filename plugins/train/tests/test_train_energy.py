"""Samples per joule where the machine exposes energy: the RAPL package counters (the
sub-domains are not counted twice) over the timed window, read by one rank per node; where
there is none, the metric is unmeasured (null) and the section says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cmx_train import energy


def test_rapl_package_counters_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("intel-rapl:0", 1_000_000), ("intel-rapl:1", 5_000_000), ("intel-rapl:0:0", 7)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "energy_uj").write_text(f"{value}\n")
    monkeypatch.setattr(energy, "POWERCAP", tmp_path)
    meter = energy.Meter("cpu")
    assert meter.source == "rapl"
    meter.start()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("2500000\n")
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("5500000\n")
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("9000000\n")  # a sub-domain of package 0
    assert meter.stop() == pytest.approx(2.0)


def test_without_counters_the_metric_is_unmeasured_and_says_why(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP", tmp_path / "absent")
    meter = energy.Meter("cpu")
    assert meter.source == "unavailable" and "no RAPL counters" in meter.reason
    meter.start()
    assert meter.stop() is None


def test_the_step_reports_samples_per_joule_as_this_machine_allows(train: Any) -> None:
    part = train(batch_size=16, steps=2, warmup_steps=0).result
    metric = part.metrics["samples_per_joule"]
    assert metric.unit == "samples/J" and metric.higher_is_better is True
    source = part.sections["train"]["ranks"][0]["energy_source"]
    if source.startswith("unavailable"):
        assert metric.value is None
    else:
        assert metric.value is not None and metric.value > 0
