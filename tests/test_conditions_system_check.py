"""``cmx system check --json``: one JSON document, valid against its schema, on this machine
and on each recorded tree (tests/fixtures/conditions/); the verdicts of each tree; bad
options exit 2 in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

TREES = Path(__file__).parent / "fixtures" / "conditions"
SCHEMA = json.loads((Path(__file__).parent.parent / "cmx_core" / "schemas" / "system-check.schema.json").read_text())


def _check(cli: Callable[..., Any], *args: str) -> dict[str, Any]:
    result = cli("system", "check", "--json", *args)
    assert result.code == 0, result.err
    document = json.loads(result.out)  # exactly one document: json.loads fails on anything more
    jsonschema.validate(document, SCHEMA)
    return document


def _fine(document: dict[str, Any]) -> dict[str, bool | None]:
    return {s["name"]: s["fine"] for s in document["sources"]}


def test_this_machine_validates(cli: Callable[..., Any]) -> None:
    document = _check(cli)
    assert document["root"] == "/"
    assert {"load average", "cpu governor", "numa balancing", "aslr", "OMP_NUM_THREADS"} <= set(_fine(document))
    assert "gpu" in _fine(document) or "gpu0 throttling" in _fine(document)  # unknown, or each GPU


@pytest.mark.parametrize("tree", ["quiet", "throttling", "performance", "numa-balancing"])
def test_each_recorded_tree_validates(cli: Callable[..., Any], tree: str) -> None:
    _check(cli, "--root", str(TREES / tree))


def test_the_verdicts_of_the_trees(cli: Callable[..., Any]) -> None:
    throttling = _fine(_check(cli, "--root", str(TREES / "throttling")))
    assert throttling["cpu governor"] is False and throttling["cpu boost/turbo"] is False
    assert throttling["cpu thermal throttling"] is False and throttling["gpu0 throttling"] is False
    assert throttling["gpu0 persistence mode"] is False and throttling["load average"] is False
    performance = _check(cli, "--root", str(TREES / "performance"))
    assert _fine(performance)["cpu governor"] is True and _fine(performance)["gpu0 throttling"] is True
    assert _fine(performance)["cpu boost/turbo"] is True and _fine(performance)["gpu0 persistence mode"] is True
    numa = _check(cli, "--root", str(TREES / "numa-balancing"))
    fixes = {s["name"]: s["fix"] for s in numa["sources"]}
    assert _fine(numa)["numa balancing"] is False
    assert fixes["numa balancing"] == "sudo sysctl -w kernel.numa_balancing=0"
    assert _fine(numa)["cgroup cpu quota"] is False and _fine(numa)["steal time"] is False and not numa["fine"]
    quiet = _check(cli, "--root", str(TREES / "quiet"))
    assert quiet["fine"] is True and _fine(quiet)["cpu governor"] is None  # unknown: no verdict, no guess


def test_the_text_report_and_bad_options(cli: Callable[..., Any]) -> None:
    text = cli("system", "check", "--wide", "--root", str(TREES / "throttling"))
    assert text.code == 0 and "sudo cpupower frequency-set -g performance" in text.out
    assert "not fine for benchmarking" in text.out.splitlines()[-1]
    for bad in (("system", "check", "--bogus"), ("system",), ("system", "check", "--root", str(TREES / "none"))):
        result = cli(*bad)
        assert result.code == 2 and len(result.err_lines) == 1, (bad, result.err)
