"""Several result parts from one run are merged by section or refused; never last-wins."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cmx_core.api import Metric, ResultPart, StepOutput, StepType, hookimpl
from cmx_core.errors import CmxError, ResultsError
from cmx_core.plugins import loader as plugins
from cmx_core.providers.parts import merge_parts
from cmx_core.run import engine


def _part(status: str = "completed", **kwargs: object) -> ResultPart:
    return ResultPart(status=status, benchmark=kwargs.pop("benchmark", {"suite": "custom", "task": "t"}),  # type: ignore[arg-type]
                      **kwargs)  # type: ignore[arg-type]


def test_parts_merge_metrics_sections_reasons_and_the_gravest_status() -> None:
    first = _part("valid", metrics={"a": Metric(1, "s", False)}, sections={"x": {"k": 1}}, invalid_reasons=("r1",))
    second = _part("invalid", metrics={"b": Metric(2, "ms", False)}, sections={"y": {}}, invalid_reasons=("r2", "r1"),
                   benchmark={"suite": "custom", "task": "t", "scenario": "Offline"})
    merged = merge_parts([("n1", first), ("n2", second)])
    assert merged.status == "invalid"
    assert set(merged.metrics) == {"a", "b"} and merged.metrics["b"].unit == "ms"
    assert merged.sections == {"x": {"k": 1}, "y": {}}
    assert merged.invalid_reasons == ("r1", "r2")
    assert merged.benchmark == {"suite": "custom", "task": "t", "scenario": "Offline"}


@pytest.mark.parametrize(("first", "second", "what"), [
    ({"metrics": {"m": Metric(1, "s", False)}}, {"metrics": {"m": Metric(2, "s", False)}}, "metric 'm'"),
    ({"sections": {"mlperf": {}}}, {"sections": {"mlperf": {}}}, "result section 'mlperf'"),
    ({"benchmark": {"suite": "custom", "task": "a"}}, {"benchmark": {"suite": "custom", "task": "b"}},
     "benchmark key 'task'"),
])
def test_a_clash_is_refused_naming_both_nodes(first: dict[str, object], second: dict[str, object], what: str) -> None:
    with pytest.raises(ResultsError) as caught:
        merge_parts([("prep", _part(**first)), ("bench", _part(**second))])
    assert f"report {what}: node prep and node bench" in str(caught.value)


RECIPE = """\
name: two-parts
tags: [two, parts]
summary: two steps, each with a result part
inputs:
  clash: {type: boolean, default: false}
steps:
  - uses: parts.emit
    with: {metric: first}
  - uses: parts.emit
    with: {metric: "{{ 'first' if inputs.clash else 'second' }}"}
"""


def _emit(ctx: object) -> StepOutput:
    name = str(ctx.params["metric"])  # type: ignore[attr-defined]
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "two", "primary_metric": "first"},
                      metrics={name: Metric(1.5, "s", False)})
    return StepOutput(outputs={}, result=part)


@hookimpl
def cmx_register_steps(register):  # type: ignore[no-untyped-def]
    register(StepType(name="parts.emit", summary="emit a result part", run=_emit, params={"metric": "its name"}))


def _use_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=[("parts", SimpleNamespace(cmx_register_steps=cmx_register_steps))])
    monkeypatch.setattr(plugins, "_REGISTRY", registry)


def test_a_run_with_two_parts_records_both_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r.yaml").write_text(RECIPE, encoding="utf-8")
    _use_plugin(monkeypatch)
    outcome = engine.run_tags("two,parts", {}, recipes_dirs=[tmp_path])
    assert set(outcome.document["metrics"]) == {"first", "second"}


def test_a_run_whose_parts_clash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r.yaml").write_text(RECIPE, encoding="utf-8")
    _use_plugin(monkeypatch)
    with pytest.raises(CmxError) as caught:
        engine.run_tags("two,parts", {"clash": True}, recipes_dirs=[tmp_path])
    assert "report metric 'first'" in str(caught.value)
