"""The run sampler beside every run (docs/telemetry.md): series in ``telemetry.om`` that
promtool imports, typed summaries in result.json, the application channel, the off switch,
GPU paths from recordings, and bad settings refused in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from cmx_core.results.validate import validate_document
from cmx_core.telemetry import names, openmetrics
from cmx_core.telemetry.amd import AmdSmiCli
from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings
from cmx_core.telemetry.devices import PowerOpeners
from cmx_core.telemetry.nvml import NvmlSource
from cmx_core.telemetry.rapl import RaplSource
from cmx_core.telemetry.replay import NvmlRecordingReplay

FIXTURES = Path(__file__).parent / "fixtures" / "power"
H200 = FIXTURES / "h200-1x-session.json"
AMD = FIXTURES / "mi300x-8x-amd-smi-metric.json"
DOC = Path(__file__).resolve().parent.parent / "docs" / "telemetry.md"

STEP_MODULE = '''
import time

from cmx_core.telemetry import collector


def work(ctx):
    """Report progress, hold 64 MiB, and wait (bounded) until the sampler saw it twice."""
    block = bytearray(64 << 20)
    for i in range(1, 4):
        ctx.report("progress", i)
    ctx.report("items", 7, kind="counter")
    active = collector._ACTIVE[-1] if collector._ACTIVE else None
    start = active.samples if active else 0
    deadline = time.monotonic() + 60
    while active is not None and active.samples < start + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"held": len(block)}
'''


def _recipe(recipes: Any, steps: str, name: str = "tele") -> None:
    head = f"name: {name}\ntags: [{name}]\nsummary: telemetry test\ncache: false\nsteps:\n"
    (recipes.dir / f"{name}.yaml").write_text(head + textwrap.indent(steps.strip(), "  ") + "\n")


def _python_recipe(recipes: Any) -> None:
    (recipes.dir / "tele_step.py").write_text(STEP_MODULE)
    _recipe(recipes, "- uses: python\n  with: {function: 'tele_step:work'}")


def _run_json(cli: Callable[..., Any], recipes: Any, *extra: str) -> dict[str, Any]:
    result = cli("run", "--recipes", recipes.dir, "--tags=tele", "--json", *extra)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


def test_a_run_writes_openmetrics_series_and_typed_summaries(cli: Callable[..., Any], recipes: Any) -> None:
    _python_recipe(recipes)
    doc = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    validate_document(doc)  # the telemetry section is part of the envelope schema
    tele = doc["telemetry"]
    assert tele["interval_s"] == 0.05 and tele["series"] == "telemetry.om" and tele["samples"] >= 4
    assert tele["sources"][0].startswith("psutil ")
    series_path = Path(_run_dir_of_last()) / "telemetry.om"
    series = openmetrics.read_series(series_path)  # prometheus_client's OpenMetrics parser
    labels = (("node", _node(series)), ("run", doc["run_id"]))
    cpu = series[("cmx_process_cpu_seconds_total", labels)]
    assert len(cpu) == tele["samples"] and [t for t, _ in cpu] == sorted(t for t, _ in cpu)
    assert all(b >= a for (_, a), (_, b) in pairwise(cpu))  # a counter never goes down
    progress = series[("cmx_app_progress", (*labels, ("step", "tele/step0")))]
    assert {v for _, v in progress} == {3.0}  # the last reported value at every round after it
    assert series[("cmx_app_items_total", (*labels, ("step", "tele/step0")))][-1][1] == 7.0
    peak = tele["metrics"]["process_peak_rss_bytes"]
    assert peak["unit"] == "bytes" and peak["higher_is_better"] is False and peak["value"] >= 64 << 20
    rss = [v for _, v in series[("cmx_process_resident_memory_bytes", labels)]]
    assert peak["value"] == max(rss)
    for key in ("process_cpu_utilization_mean", "process_cpu_utilization_p95"):
        assert tele["metrics"][key]["unit"] == "cores"
    for name, values in series.items():  # every sample belongs to a documented family or the app prefix
        assert name[0].startswith(names.APP_PREFIX) or name[0] in {f.sample_name for f in names.FAMILIES}
        assert values


def _node(series: openmetrics.Series) -> str:
    key = next(k for k in series if k[0] == "cmx_telemetry_samples_total")
    return dict(key[1])["node"]


def test_what_cannot_be_read_is_said_once_and_never_faked(cli: Callable[..., Any], recipes: Any) -> None:
    _python_recipe(recipes)
    tele = _run_json(cli, recipes, "--telemetry-interval", "0.05")["telemetry"]
    series = openmetrics.read_series(Path(_run_dir_of_last()) / "telemetry.om")
    has_gpu = any(k[0].startswith("cmx_gpu_") for k in series)
    gpu_lines = [line for line in tele["unavailable"] if line.startswith("GPU: ")]
    assert len(gpu_lines) == (0 if has_gpu else 1)  # said once, for the whole run
    if not has_gpu:  # no series and no summary invented for what is not there
        assert not any(k.startswith("gpu_") for k in tele["metrics"])
    from cmx_core.telemetry.reading import NVIDIA_DRIVER

    if not any(Path(p).exists() for p in NVIDIA_DRIVER):  # no driver: NVML is not even imported
        assert gpu_lines[0].startswith("GPU: NVML: no NVIDIA driver on this machine")
    assert len(set(tele["unavailable"])) == len(tele["unavailable"])


def _run_dir_of_last() -> str:
    from cmx_core import paths

    return str(sorted((paths.data_dir() / "runs").iterdir(), key=lambda p: p.stat().st_mtime)[-1])


def test_the_off_switch_flag_and_environment(cli: Callable[..., Any], recipes: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _recipe(recipes, "- uses: shell\n  with: {cmd: ['true']}")
    doc = _run_json(cli, recipes, "--no-telemetry")
    assert "telemetry" not in doc and not (Path(_run_dir_of_last()) / "telemetry.om").exists()
    monkeypatch.setenv("CMX_TELEMETRY", "off")
    assert "telemetry" not in _run_json(cli, recipes)
    monkeypatch.setenv("CMX_TELEMETRY", "1")
    monkeypatch.setenv("CMX_TELEMETRY_INTERVAL_S", "0.25")
    assert _run_json(cli, recipes)["telemetry"]["interval_s"] == 0.25
    assert _run_json(cli, recipes, "--telemetry-interval", "0.1")["telemetry"]["interval_s"] == 0.1  # the flag wins


def test_a_run_served_wholly_from_the_cache_has_no_telemetry(cli: Callable[..., Any], recipes: Any) -> None:
    (recipes.dir / "tele.yaml").write_text("name: tele\ntags: [tele]\nsummary: cached\nsteps:\n"
                                           "  - uses: shell\n    with: {cmd: ['true']}\n")
    assert "telemetry" in _run_json(cli, recipes)
    again = _run_json(cli, recipes)
    assert "telemetry" not in again and not (Path(_run_dir_of_last()) / "telemetry.om").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--metrics-port", "http"), "--metrics-port: 'http' is not a port number"),
    (("--metrics-port", "70000"), "--metrics-port: a port is 1-65535, not 70000"),
    (("--telemetry-interval", "0"), "--telemetry-interval: the sampling interval must be at least 0.05 s, not 0"),
    (("--telemetry-interval", "fast"), "--telemetry-interval: 'fast' is not a number of seconds"),
    (("--metrics-port", "9", "--no-telemetry"), "--metrics-port needs telemetry"),
])
def test_bad_telemetry_options_are_one_line_exit_2(cli: Callable[..., Any], recipes: Any,
                                                   args: tuple[str, ...], message: str) -> None:
    _recipe(recipes, "- uses: shell\n  with: {cmd: ['true']}")
    result = cli("run", "--recipes", recipes.dir, "--tags=tele", *args)
    assert result.code == 2 and len(result.err_lines) == 1 and message in result.err, result.err


def test_a_metrics_port_in_use_is_refused_before_the_run(cli: Callable[..., Any], recipes: Any) -> None:
    import socket

    _recipe(recipes, "- uses: shell\n  with: {cmd: ['true']}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("run", "--recipes", recipes.dir, "--tags=tele", "--metrics-port", str(port))
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert f"cannot listen on 127.0.0.1:{port}" in result.err


def test_a_shell_step_reports_through_the_metrics_file(cli: Callable[..., Any], recipes: Any) -> None:
    script = 'echo "done_items 5" >> "$CMX_METRICS_FILE"; echo "tokens 512 counter" >> "$CMX_METRICS_FILE"; ' \
             'echo "not a metric line" >> "$CMX_METRICS_FILE"'
    _recipe(recipes, f"- uses: shell\n  with: {{cmd: ['sh', '-c', {json.dumps(script)}]}}")
    doc = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    series = openmetrics.read_series(Path(_run_dir_of_last()) / "telemetry.om")
    by_name = {k[0]: v for k, v in series.items()}
    assert by_name["cmx_app_done_items"][-1][1] == 5.0  # the last round reads what the step wrote
    assert by_name["cmx_app_tokens_total"][-1][1] == 512.0
    [skipped] = [line for line in doc["telemetry"]["unavailable"] if "skipped" in line]
    assert "'not a metric line' skipped (want NAME[{LABELS}] VALUE [gauge|counter])" in skipped


def test_promtool_imports_the_series_file(cli: Callable[..., Any], recipes: Any, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/install.sh --test installs Debian's prometheus as root)")
    _python_recipe(recipes)
    doc = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    series_file = Path(_run_dir_of_last()) / "telemetry.om"
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(series_file),
                           str(tmp_path / "tsdb")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    listed = subprocess.run([promtool, "tsdb", "list", str(tmp_path / "tsdb")], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    samples = sum(len(v) for v in openmetrics.read_series(series_file).values())
    header, row = listed.stdout.splitlines()[:2]
    assert header.split()[:2] == ["BLOCK", "ULID"]
    assert int(row.split()[-4]) == samples  # NUM SAMPLES: every sample of the file was imported
    assert doc["telemetry"]["samples"] >= 2


# -- GPUs and RAPL from recordings and real file layouts -------------------------------------------------


def _rapl_tree(root: Path) -> None:
    d = root / "intel-rapl:0"
    d.mkdir(parents=True)
    (d / "name").write_text("package-0\n")
    (d / "energy_uj").write_text("1000000\n")
    (d / "max_energy_range_uj").write_text("262143328850\n")


def test_nvml_and_rapl_series_from_a_recording(tmp_path: Path) -> None:
    recording = json.loads(H200.read_text())
    replay = NvmlRecordingReplay.from_file(H200)
    _rapl_tree(tmp_path / "powercap")
    telemetry = RunTelemetry("r1", tmp_path, TelemetrySettings(interval_s=3600.0),
                             openers=PowerOpeners(gpu=(lambda: NvmlSource(replay),),
                                                  rapl=(lambda: RaplSource(tmp_path / "powercap"),)))
    telemetry.start()  # round 1; the thread waits an hour, so only the calls below sample
    (tmp_path / "powercap" / "intel-rapl:0" / "energy_uj").write_text("4000000\n")
    rounds = len(recording["t_s"]) - 2  # [0] of the energy series is the source's support probe
    for _ in range(rounds - 2):
        telemetry.sample()
    section = telemetry.stop()
    assert telemetry.unavailable == [], telemetry.unavailable
    assert section["devices"] == ["gpu0:NVIDIA H200", "intel-rapl:0:package-0"]
    series = openmetrics.read_series(tmp_path / "telemetry.om")
    gpu = {k[0]: [v for _, v in vals] for k, vals in series.items() if dict(k[1]).get("gpu") == "0"}
    watts = [mw / 1000 for mw in recording["series"]["nvmlDeviceGetPowerUsage(0)"]]
    assert gpu["cmx_gpu_power_watts"] == pytest.approx(watts[:rounds])
    counter_mj = recording["series"]["nvmlDeviceGetTotalEnergyConsumption(0)"]
    assert gpu["cmx_gpu_energy_joules_total"][-1] == pytest.approx((counter_mj[rounds] - counter_mj[1]) / 1000)
    assert section["metrics"]["gpu_energy_joules"]["value"] == pytest.approx(gpu["cmx_gpu_energy_joules_total"][-1])
    assert section["metrics"]["cpu_energy_joules"] == {"value": pytest.approx(3.0), "unit": "J",
                                                       "higher_is_better": False}
    assert section["metrics"]["gpu_memory_peak_bytes"]["unit"] == "bytes"
    assert "gpu_temperature_max_celsius" not in section["metrics"]  # not recorded: not reported


def test_amd_smi_series_from_its_recorded_output(tmp_path: Path) -> None:
    fake = tmp_path / "amd-smi"
    fake.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps(json.load(open({str(AMD)!r}))['stdout']))\n")
    fake.chmod(0o755)
    telemetry = RunTelemetry("r2", tmp_path, TelemetrySettings(interval_s=3600.0),
                             openers=PowerOpeners(gpu=(lambda: AmdSmiCli(str(fake)),), rapl=()))
    telemetry.start()
    section = telemetry.stop()
    assert len(section["devices"]) == 8
    series = openmetrics.read_series(tmp_path / "telemetry.om")
    powered = {dict(k[1])["gpu"] for k in series if k[0] == "cmx_gpu_power_watts"}
    assert powered == {str(i) for i in range(7)}  # gpu 7's socket_power is "N/A": no series, no zero
    assert {dict(k[1])["gpu"] for k in series if k[0] == "cmx_gpu_memory_used_bytes"} == {str(i) for i in range(8)}
    assert section["metrics"]["gpu_memory_peak_bytes"]["value"] > 0


def test_results_show_prints_the_resource_summaries(cli: Callable[..., Any], recipes: Any) -> None:
    _python_recipe(recipes)
    doc = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    shown = cli("results", "show", doc["run_id"], "--wide")  # one line a reason (80 columns wrap them)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    header = next(line for line in lines if line.startswith("  telemetry: "))
    assert f"{doc['telemetry']['samples']} samples every 0.05 s in telemetry.om (psutil " in header
    peak = next(line for line in lines if line.strip().startswith("process_peak_rss_bytes"))
    assert peak.split()[-1] == "bytes"
    for reason in doc["telemetry"]["unavailable"]:
        assert f"    not read: {reason}" in lines


def test_nvml_temperature_and_throttle_events_from_a_replay(tmp_path: Path) -> None:
    """A call-for-call replay (the recording format of :mod:`cmx_core.telemetry.record`) of a GPU
    that heats up and throttles: a thermal slowdown, a recovery, another, then a power cap."""
    recording = {"calls": {"nvmlDeviceGetCount()": 1, "nvmlDeviceGetName(0)": "NVIDIA H200"},
                 "series": {"nvmlDeviceGetTemperature(0,0)": [41, 62, 83, 84, 79],
                            "nvmlDeviceGetCurrentClocksEventReasons(0)": [0x20, 0x1, 0x20, 0x40, 0x4]}}
    replay = NvmlRecordingReplay(recording)
    telemetry = RunTelemetry("r3", tmp_path, TelemetrySettings(interval_s=3600.0),
                             openers=PowerOpeners(gpu=(lambda: NvmlSource(replay),), rapl=()))
    telemetry.start()
    for _ in range(3):
        telemetry.sample()
    section = telemetry.stop()
    assert all(replay.remaining(k) == 0 for k in recording["series"])
    series = openmetrics.read_series(tmp_path / "telemetry.om")
    events = [v for k, vals in series.items() if k[0] == "cmx_gpu_throttle_events_total" for _, v in vals]
    assert events == [1.0, 1.0, 2.0, 2.0, 2.0]  # idle (0x1) is no throttle; 0x20 -> 0x40 -> 0x4 is one episode
    assert section["metrics"]["gpu_throttle_events"] == {"value": 2.0, "unit": "count", "higher_is_better": False}
    assert section["metrics"]["gpu_temperature_max_celsius"]["value"] == 84.0
    assert not any(k[0] in ("cmx_gpu_power_watts", "cmx_gpu_energy_joules_total") for k in series)  # not recorded


def test_results_compare_shows_the_resource_summaries(cli: Callable[..., Any], recipes: Any) -> None:
    _python_recipe(recipes)
    first = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    second = _run_json(cli, recipes, "--telemetry-interval", "0.05")
    compared = cli("results", "compare", first["run_id"], second["run_id"], "--json")
    assert compared.code == 0, compared.err
    rows = {row["name"]: row for row in json.loads(compared.out)["metrics"]}
    names = list(rows)
    assert names.index("timing.wall_s") < names.index("telemetry.process_peak_rss_bytes")
    peak = rows["telemetry.process_peak_rss_bytes"]
    assert peak["higher_is_better"] is False
    assert peak["cells"][0]["value"] == first["telemetry"]["metrics"]["process_peak_rss_bytes"]["value"]
    text = cli("results", "compare", first["run_id"], second["run_id"])
    assert "telemetry." in text.out  # the table (a narrow one wraps the long names)
    _recipe(recipes, "- uses: python\n  with: {function: 'tele_step:work'}", name="tele2")  # another lock
    other = cli("run", "--recipes", recipes.dir, "--tags=tele2", "--json", "--telemetry-interval", "0.05")
    assert other.code == 0, other.err
    page = recipes.dir.parent / "report.html"
    report = cli("results", "report", first["run_id"], json.loads(other.out)["run_id"], "-o", page)
    assert report.code == 0, report.err
    assert "telemetry.process_peak_rss_bytes (lower better)" in page.read_text()  # the HTML report's comparison
