"""A sweep plans each point once: the checked plan of a point run as its own ``cmx run``
process is handed to that process on its standard input (cmx_core.plan.handoff) instead of
being resolved again there; a bad or foreign hand-off is a one-line exit 2."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.plan.handoff import plan_bytes
from cmx_core.resolve.resolver import Resolver
from cmx_core.run import engine
from cmx_core.sweep.runner import SweepRequest, run_sweep

# Loaded by every Python the test's children start: each resolution they make is a line.
SPY = """
import os
from cmx_core.resolve import resolver
_resolve = resolver.Resolver.resolve
def _counted(self, *args, **kwargs):
    with open(os.environ["SPY_RESOLVES_FILE"], "a") as log:
        log.write(" ".join(args[0]) + "\\n")
    return _resolve(self, *args, **kwargs)
resolver.Resolver.resolve = _counted
"""


@pytest.fixture
def child_resolutions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file each child process's resolution is written to (absent: none)."""
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "sitecustomize.py").write_text(SPY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(spy), os.environ.get("PYTHONPATH")])))
    log = tmp_path / "resolutions.txt"
    monkeypatch.setenv("SPY_RESOLVES_FILE", str(log))
    return log


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_each_point_is_resolved_once_in_the_sweep_and_not_again_in_its_process(
        cli: Callable[..., Any], child_resolutions: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here: list[tuple[str, ...]] = []
    real = Resolver.resolve

    def counted(self: Resolver, tags: tuple[str, ...], *args: Any, **kwargs: Any) -> Any:
        here.append(tuple(tags))
        return real(self, tags, *args, **kwargs)

    monkeypatch.setattr(Resolver, "resolve", counted)
    result = cli("sweep", "--tags=demo,sort", "--matrix", "size=3,4,5", "-j", "2", "--json")
    assert result.code == 0, result.err
    assert here == [("demo", "sort")] * 3  # the sweep's own check, once a point
    assert _lines(child_resolutions) == []  # and no point's process resolved it again

    # The control: a sweep that was handed no plans (as a plugin's run_sweep call) has each
    # point's process plan it, so the spy does see the children.
    plain = run_sweep(SweepRequest("demo,sort", {}, [{"size": "3"}, {"size": "4"}], data_dir=paths.data_dir()))
    assert plain.failed == 0
    assert _lines(child_resolutions) == ["demo sort", "demo sort"]


def _run_with_stdin(data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "cmx_core", "run", *args, "--plan-on-stdin", "-q"],
                          input=data, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize(("data", "says"), [
    (b"", "no plan on standard input (this option is set by cmx sweep only)"),
    (b"not a pickle", "standard input is not a plan written by cmx sweep"),
    (pickle.dumps({"query": ["demo", "sort"], "nodes": []}), "standard input is not a plan written by cmx sweep"),
])
def test_a_run_handed_no_plan_is_a_one_line_error(data: bytes, says: str) -> None:
    proc = _run_with_stdin(data, "--tags=demo,sort")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert f"--plan-on-stdin: {says}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_plan_for_other_inputs_is_refused_before_anything_runs(tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort", {"size": "3"})
    out = tmp_path / "run"
    proc = _run_with_stdin(plan_bytes(the_plan), "--tags=demo,sort", "--size=4", "--output", str(out))
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "the plan handed to this run is for --tags=demo,sort {'size': '3'}" in err, err
    assert "not --tags=demo,sort {'size': '4'}" in err and "Traceback" not in err
    assert not out.exists()  # nothing was written


def test_a_handed_plan_runs_as_its_own_plan(tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort", {"size": "6"})
    out = tmp_path / "run"
    proc = _run_with_stdin(plan_bytes(the_plan), "--tags=demo,sort", "--size=6", "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads((out / "plan.json").read_text()) == json.loads(json.dumps(the_plan.to_json()))
    assert json.loads(proc.stdout)["status"] == "valid"
