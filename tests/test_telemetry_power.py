"""Power sources, the sampler and the cost section, driven by recordings and real file layouts.

The NVML backend runs against recorded sessions (a recording replay: this machine has no
GPU); RAPL against a sysfs tree in ``tmp_path`` (its real layout); amd-smi against its JSON.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import Metric
from cmx_core.telemetry import record
from cmx_core.telemetry.amd import AmdSmiCli, parse_metric_json, quantity
from cmx_core.telemetry.energy import COUNTER, INTEGRATED, Meter, open_source, summarize
from cmx_core.telemetry.nvml import NvmlSource
from cmx_core.telemetry.rapl import RaplSource, unwrap
from cmx_core.telemetry.reading import Reading, Unavailable
from cmx_core.telemetry.replay import NvmlRecordingReplay
from cmx_core.telemetry.sampler import SERIES_COLUMNS, SERIES_FILE, PowerSampler, Round, Session, write_series
from cmx_mlperf.power.cost import cost_per_million, cost_section

FIXTURES = Path(__file__).parent / "fixtures" / "power"
H200 = FIXTURES / "h200-1x-session.json"
H100_NO_COUNTER = FIXTURES / "h100-sxm-8x-no-counter-session.json"
AMD = FIXTURES / "mi300x-8x-amd-smi-metric.json"


def _replayed(path: Path, rounds: int | None = None) -> tuple[Session, NvmlRecordingReplay]:
    """Drive the sampler through every recorded round (or ``rounds``) without a thread."""
    replay = NvmlRecordingReplay.from_file(path)
    sampler = PowerSampler(NvmlSource(replay), 0.1, clock=replay.clock)
    total = len(replay.recording["t_s"]) if rounds is None else rounds
    sampler.start(thread=False)
    for _ in range(total - 2):
        sampler.sample()
    return sampler.stop(), replay


def test_h200_energy_is_the_counter_delta_over_the_window(tmp_path: Path) -> None:
    recording = json.loads(H200.read_text())
    session, replay = _replayed(H200)
    report = summarize(session)
    counter_mj = recording["series"]["nvmlDeviceGetTotalEnergyConsumption(0)"]
    expected_j = (counter_mj[-1] - counter_mj[1]) / 1000  # [0] is the support probe
    duration = recording["t_s"][-1] - recording["t_s"][0]
    assert report.source == "nvml" and report.devices == ("gpu0:NVIDIA H200",)
    assert report.method == COUNTER and report.estimated is False
    assert report.energy_j == pytest.approx(expected_j)
    assert report.duration_s == pytest.approx(duration)
    assert report.avg_power_w == pytest.approx(expected_j / duration)
    assert report.avg_power_w == pytest.approx(101.47)  # the recorded idle draw (nvidia-smi -q)
    assert report.samples == len(recording["t_s"]) and report.energy_reason is None
    assert all(replay.remaining(k) == 0 for k in recording["series"])  # every recorded value was read

    rows = write_series(session, tmp_path / SERIES_FILE)
    with open(tmp_path / SERIES_FILE, newline="") as handle:
        table = list(csv.DictReader(handle))
    assert rows == len(table) == len(recording["t_s"]) and tuple(table[0]) == SERIES_COLUMNS
    assert float(table[-1]["energy_j"]) == pytest.approx(expected_j, abs=1e-3)
    assert float(table[0]["power_w"]) == pytest.approx(101.47)
    assert float(table[0]["mem_used_mib"]) == 1.0 and float(table[0]["gpu_util_pct"]) == 0.0


def test_h200_tokens_per_joule_and_cost_per_million_tokens() -> None:
    report = summarize(_replayed(H200)[0]).as_dict()
    tokens_per_s = 480.0
    section, metrics = cost_section(report, 2.5, {"tokens_per_second": Metric(tokens_per_s, "tokens/s", True)})
    assert section["energy_j"] == report["energy_j"] and section["source"] == "nvml"
    assert section["tokens_per_joule"] == pytest.approx(tokens_per_s / report["avg_power_w"])
    assert section["cost_per_million_tokens_usd"] == pytest.approx(2.5 / (tokens_per_s * 3600) * 1e6)
    assert section["price_per_hour_usd"] == 2.5
    assert "cost_reason" not in section and "energy_reason" not in section
    assert metrics["energy_j"] == Metric(report["energy_j"], "J", False)
    assert metrics["avg_power_w"].unit == "W" and metrics["avg_power_w"].higher_is_better is False
    assert metrics["tokens_per_joule"].unit == "tokens/J" and metrics["tokens_per_joule"].higher_is_better
    assert metrics["cost_per_million_tokens_usd"].unit == "USD/1M tokens"


def test_without_an_energy_counter_the_power_samples_are_integrated_and_labelled_estimated() -> None:
    recording = json.loads(H100_NO_COUNTER.read_text())
    report = summarize(_replayed(H100_NO_COUNTER)[0])
    assert len(report.devices) == 8 and report.method == INTEGRATED and report.estimated is True
    t = recording["t_s"]
    for index, device in enumerate(report.devices):
        watts = [mw / 1000 for mw in recording["series"][f"nvmlDeviceGetPowerUsage({index})"]]
        expected = sum((t[i + 1] - t[i]) * (watts[i] + watts[i + 1]) / 2 for i in range(len(t) - 1))
        assert report.per_device_j[device] == pytest.approx(expected)
    assert report.energy_j == pytest.approx(sum(report.per_device_j.values()))


def test_trapezoid_follows_a_changing_draw() -> None:
    rounds = tuple(Round(t, (Reading("gpu0", power_w=w),)) for t, w in ((0.0, 100.0), (1.0, 200.0), (3.0, 100.0)))
    report = summarize(Session("nvml", ("gpu0",), 1.0, rounds))
    assert report.energy_j == pytest.approx(150.0 + 300.0)
    assert report.avg_power_w == pytest.approx(450.0 / 3.0)


def test_a_read_that_fails_mid_run_leaves_energy_null_with_the_reason() -> None:
    replay = NvmlRecordingReplay.from_file(H200)
    sampler = PowerSampler(NvmlSource(replay), 0.1, clock=replay.clock)
    sampler.start(thread=False)
    for _ in range(len(replay.recording["t_s"]) - 1):  # every recorded round is read ...
        sampler.sample()
    report = summarize(sampler.stop())  # ... so the last read of stop() finds nothing left
    assert report.energy_j is None and report.avg_power_w is None
    assert str(report.energy_reason).startswith("energy not measured over the whole test: nvml read failed after")
    assert "has no value left" in str(report.energy_reason)


def test_the_recorder_writes_what_the_replay_answers_with_the_same_joules(tmp_path: Path) -> None:
    data = record.record(0.25, 50.0, api=NvmlRecordingReplay.from_file(H200))
    assert data["calls"]["nvmlDeviceGetName(0)"] == "NVIDIA H200"
    assert len(data["t_s"]) == data["summary"]["samples"] >= 2
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(data))
    session, _ = _replayed(path)
    assert summarize(session).energy_j == pytest.approx(data["summary"]["energy_j"])
    assert "recorded on" in data["provenance"]


def test_the_recorder_says_in_one_line_why_it_cannot_record(tmp_path: Path, capsys: Any) -> None:
    source, _ = open_source()
    if source is not None and source.name == "nvml":  # a GPU host: a real recording
        source.close()
        assert record.main([str(tmp_path / "r.json"), "--seconds", "0.3"]) == 0
        assert json.loads((tmp_path / "r.json").read_text())["series"]
        return
    assert record.main([str(tmp_path / "r.json"), "--seconds", "0.1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("record: NVML: ") and "\n" not in err
    assert not (tmp_path / "r.json").exists()


def _rapl_tree(root: Path, domains: dict[str, tuple[str, int, int]]) -> None:
    for name, (label, energy, max_range) in domains.items():
        d = root / name
        d.mkdir(parents=True)
        (d / "name").write_text(label + "\n")
        (d / "energy_uj").write_text(f"{energy}\n")
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")


def test_rapl_reads_package_domains_and_unwraps_the_counter(tmp_path: Path) -> None:
    max_range = 262_143_328_850
    _rapl_tree(tmp_path, {"intel-rapl:0": ("package-0", max_range - 2_000_000, max_range),
                          "intel-rapl:0:0": ("core", 5, max_range),  # a subdomain: part of package-0
                          "intel-rapl:1": ("package-1", 10_000_000, max_range)})
    source = RaplSource(tmp_path)
    assert source.devices == ("intel-rapl:0:package-0", "intel-rapl:1:package-1")
    first = source.read()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("3000000\n")  # wrapped past max_energy_range_uj
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("14000000\n")
    second = source.read()
    assert second[0].energy_j - first[0].energy_j == pytest.approx(5.0)  # 2 J before the wrap + 3 J after
    assert second[1].energy_j - first[1].energy_j == pytest.approx(4.0)
    assert unwrap(10, 4, 100) == 94 and unwrap(4, 10, 100) == 6
    session = Session("rapl", source.devices, 1.0, (Round(0.0, first), Round(2.0, second)))
    assert summarize(session).energy_j == pytest.approx(9.0) and summarize(session).avg_power_w == 4.5


def test_rapl_says_why_it_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match=r"^RAPL: .* has no intel-rapl package domain$"):
        RaplSource(tmp_path / "absent")
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir(parents=True)  # present, but not a readable file
    with pytest.raises(Unavailable, match=r"^RAPL: "):
        RaplSource(tmp_path)


def test_amd_smi_metric_json_is_parsed_per_gpu() -> None:
    fixture = json.loads(AMD.read_text())
    readings = parse_metric_json(json.dumps(fixture["stdout"]))
    assert [r.device for r in readings] == [f"gpu{n}" for n in range(8)]
    for entry, reading in zip(fixture["stdout"], readings, strict=True):
        power = entry["power"]["socket_power"]
        assert reading.power_w == (None if power == "N/A" else power["value"])
        assert reading.energy_j == pytest.approx(entry["energy"]["total_energy_consumption"]["value"] / 1e6)
        assert reading.mem_used_mib == entry["mem_usage"]["used_vram"]["value"]
        assert reading.util_pct == 0.0
    assert parse_metric_json(json.dumps({"gpu_data": fixture["stdout"]})) == readings  # newer releases' wrap
    assert quantity({"value": 1.5, "unit": "kW"}, "W") is None  # an unknown unit is not guessed
    assert quantity({"value": 2500, "unit": "mW"}, "W") == 2.5 and quantity("N/A", "W") is None


def test_amd_smi_cli_absent_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Unavailable, match=r"^amd-smi: .*amd-smi is not on PATH$"):
        AmdSmiCli()


def test_this_machine_reports_its_power_source_or_why_there_is_none() -> None:
    source, reason = open_source()
    if source is not None:
        assert source.name in ("nvml", "amd-smi", "rapl") and len(source.read()) == len(source.devices)
        source.close()
        return
    assert reason.startswith("no power source: NVML: ")
    assert "; amd-smi: " in reason and "; RAPL: " in reason and "\n" not in reason


def test_the_meter_samples_on_its_thread_and_writes_the_series(tmp_path: Path) -> None:
    _rapl_tree(tmp_path / "sys", {"intel-rapl:0": ("package-0", 1000, 10**9)})
    meter = Meter(10.0, opener=lambda: (RaplSource(tmp_path / "sys"), ""))
    meter.prepare()
    meter.start()
    time.sleep(0.05)
    report = meter.stop(tmp_path)
    assert report["source"] == "rapl" and report["samples"] >= 2 and report["series"] == SERIES_FILE
    assert report["energy_j"] == 0.0 and report["method"] == COUNTER  # the fake counter did not move
    lines = (tmp_path / SERIES_FILE).read_text().splitlines()
    assert lines[0] == ",".join(SERIES_COLUMNS) and len(lines) == report["samples"] + 1


def test_the_meter_without_a_source_or_switched_off_says_why(tmp_path: Path) -> None:
    assert Meter(None).period_s == pytest.approx(0.1) and Meter(250.0).period_s == pytest.approx(0.25)
    off = Meter(0.0)
    off.prepare()
    off.start()
    assert off.stop(tmp_path)["energy_reason"] == "power sampling is off (power_sample_ms: 0)"
    none = Meter(None, opener=lambda: (None, "no power source: NVML: x; amd-smi: y; RAPL: z"))
    none.prepare()
    none.start()
    report = none.stop(tmp_path)
    assert report["source"] == "none" and report["energy_j"] is None and report["samples"] == 0
    assert report["energy_reason"].startswith("no power source") and not (tmp_path / SERIES_FILE).exists()


def test_cost_without_energy_or_price_is_null_with_reasons() -> None:
    energy = {"source": "none", "energy_j": None, "avg_power_w": None, "energy_reason": "no power source: ..."}
    tokens = {"tokens_per_second": Metric(100.0, "tokens/s", True)}
    section, metrics = cost_section(energy, None, tokens)
    assert section["tokens_per_joule"] is None and section["tokens_per_joule_reason"] == "no power source: ..."
    assert section["cost_per_million_tokens_usd"] is None and "--price-per-hour" in section["cost_reason"]
    assert metrics == {}
    section, metrics = cost_section(energy, 3.0, tokens)  # a price alone is enough for the cost
    assert section["cost_per_million_tokens_usd"] == pytest.approx(cost_per_million(3.0, 100.0))
    assert set(metrics) == {"cost_per_million_tokens_usd"}
    section, _ = cost_section(None, 3.0, {})
    assert section["energy_reason"] == "the LoadGen child reported no energy"
    assert section["cost_reason"] == "no throughput measured"


def test_a_run_without_tokens_reports_per_sample_figures() -> None:
    energy = {"source": "nvml", "energy_j": 50.0, "avg_power_w": 100.0}
    section, metrics = cost_section(energy, 2.0, {"samples_per_second": Metric(400.0, "samples/s", True)})
    assert section["samples_per_joule"] == pytest.approx(4.0)
    assert section["cost_per_million_samples_usd"] == pytest.approx(2.0 / (400.0 * 3600) * 1e6)
    assert section["cost_per_million_tokens_usd"] is None and "samples, not tokens" in section["cost_reason"]
    assert metrics["samples_per_joule"].unit == "samples/J" and "tokens_per_joule" not in metrics


def test_the_committed_session_fixtures_are_what_the_builder_builds() -> None:
    spec = importlib.util.spec_from_file_location("build_sessions", FIXTURES / "build_sessions.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    for name, args in builder.SESSIONS.items():
        built = builder.build(*args)
        assert json.loads((FIXTURES / name).read_text()) == built
        assert "built from recorded static values" in built["provenance"]
    assert json.loads(AMD.read_text()) == builder.amd_metric("mi300x-8x")
