"""docs/telemetry.md says what the code does: the names table is the catalog's, the settings
are the ones read, the causes and summaries are the ones produced, the quoted messages are
the ones printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_core.telemetry.collector import WINDOW_ROUNDS, TelemetrySettings, check_interval, check_port
from cmx_core.telemetry.names import FAMILIES, UNIT_WORDS, app_series, markdown_table
from cmx_core.telemetry.openmetrics import SERIES_FILE, Round
from cmx_core.telemetry.spool import FLUSH_LINES, FLUSH_S, SPOOL_SUFFIX
from cmx_core.telemetry.summary import summarize

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "telemetry.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def test_the_names_table_is_the_catalog() -> None:
    block = re.search(r"<!-- families:begin.*?-->\n(.*?)\n<!-- families:end -->", DOC, re.S)
    assert block is not None and block.group(1) == markdown_table()
    assert len(FAMILIES) == markdown_table().count("\n") - 1


def test_the_settings_are_the_ones_read() -> None:
    settings = _section("Settings")
    for flag in ("--no-telemetry", "--telemetry-interval", "--metrics-port"):
        assert f"`{flag}" in settings
    assert TelemetrySettings.from_env({}) == TelemetrySettings(True, 1.0, None)
    for off in ("0", "off", "false", "no"):
        assert f"`{off}`" in settings and not TelemetrySettings.from_env({"CMX_TELEMETRY": off}).enabled
    env = {"CMX_TELEMETRY_INTERVAL_S": "0.05", "CMX_METRICS_PORT": "9464"}
    assert TelemetrySettings.from_env(env) == TelemetrySettings(True, 0.05, 9464)
    assert "at least 0.05" in settings
    assert TelemetrySettings.from_env({}).metrics_addr == "127.0.0.1"
    assert TelemetrySettings.from_env({"CMX_METRICS_ADDR": "0.0.0.0"}).metrics_addr == "0.0.0.0"
    assert "listens on `127.0.0.1` only, unless `CMX_METRICS_ADDR`" in " ".join(DOC.split())
    for bad, check in (("http", check_port), ("70000", check_port), ("0", check_interval)):
        with pytest.raises(UsageError) as raised:
            check(bad, "--metrics-port" if check is check_port else "--telemetry-interval")
        assert f"`{raised.value}`" in " ".join(settings.split())  # the doc quotes the message as printed


def test_the_causes_table_is_the_schema_enum() -> None:
    schema = json.loads((ROOT / "cmx_core" / "schemas" / "result.schema.json").read_text())
    enum = schema["$defs"]["error"]["properties"]["cause"]["enum"]
    documented = re.findall(r"^\| `([a-z_]+)` \|", _section("Why a step died"), re.M)
    assert documented == enum


def test_the_summary_table_lists_what_summaries_produce() -> None:
    points = tuple((f.name, (("gpu", "0"),) if "gpu" in f.labels else (), 1.0) for f in FAMILIES)
    produced = set(summarize([Round(0.0, points), Round(1.0, points)]))
    table = _section("In result.json").split("| metric |", 1)[1]
    names: set[str] = set()
    for cell in re.findall(r"^\| (`[^|]+) \|", table, re.M):
        parts = re.findall(r"`([a-z0-9_]+)`", cell)
        base = parts[0]
        names.add(base)
        names.update(base.rsplit("_", 1)[0] + p if p.startswith("_") else p for p in parts[1:])
    assert names == produced


def test_the_soak_section_states_the_constants() -> None:
    from cmx_core.telemetry import soak

    text = " ".join(_section("Soak").split())
    assert f"first {soak.WARMUP} repetitions" in text
    assert f"{soak.LEAK_BYTES_PER_REPETITION // 1024} KiB per repetition" in text
    assert f"{soak.LEAK_FRACTION:.1%} of the first RSS" in text
    assert f"more than {soak.DRIFT_LIMIT:.0%} either way" in text
    assert f"fewer than {soak.WARMUP + soak.MIN_REPETITIONS} repetitions" in text


def test_the_readme_points_here() -> None:
    assert "docs/telemetry.md" in (ROOT / "README.md").read_text()


def test_the_series_file_section_states_what_memory_holds() -> None:
    text = " ".join(_section("The series file").split())
    assert f"batches of at most {FLUSH_LINES} lines or {FLUSH_S:g} s" in text
    assert f"`{SERIES_FILE}{SPOOL_SUFFIX}/`" in text
    assert f"the last {WINDOW_ROUNDS} rounds" in text


def test_the_unit_words_the_names_section_lists_are_converted() -> None:
    text = " ".join(_section("Names").split())
    for word in ("ns", "us", "ms", "s", "sec", "h", "d", "b", "kb", "mb", "gb", "kib", "mib", "gib", "pct",
                 "percent"):
        assert f"`{word}`" in text and word in UNIT_WORDS
    assert "`tokens_per_ms` is `cmx_app_tokens_per_second`, times 1000" in text
    assert app_series("tokens_per_ms") == ("cmx_app_tokens_per_second", 1000.0)
    assert "`latency_p99_ns` is `cmx_app_latency_p99_seconds`" in text
    assert app_series("latency_p99_ns")[0] == "cmx_app_latency_p99_seconds"
