"""Only the engine records a run: it builds the document from the executor's typed
outcome, validates it once, writes it and indexes it, also when the executor itself fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import Executor, hookimpl
from cmx_core.errors import CmxError, StepFailed, UsageError
from cmx_core.plugins import loader as plugins
from cmx_core.results import store, validate, writer
from cmx_core.run import engine


def test_a_run_validates_its_result_once(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = validate.validate_document

    def counting(document: Any, source: str = "", suites: Any = None) -> None:
        calls.append(source)
        real(document, source, suites)

    monkeypatch.setattr(writer, "validate_document", counting)
    monkeypatch.setattr(store, "validate_document", counting)
    result = engine.run_tags("demo,data", {"size": "100"})
    assert calls == [str(result.result_path)]
    written = json.loads(result.result_path.read_text())
    assert written["run_id"] == result.run_id
    assert json.loads((result.run_dir / "nodes.json").read_text())[0]["node_id"] == "demo-data"
    assert "os" in json.loads((result.run_dir / "facts.json").read_text())


class _Broken:
    @staticmethod
    def _run(request: Any) -> Any:
        raise UsageError("the cluster refused the job: no such partition 'gpu'")

    @hookimpl
    def cmx_register_executors(self, register: Any) -> None:
        register(Executor(name="broken", summary="fails before anything runs", run=self._run))


def test_an_executor_that_fails_still_records_an_error_result(cmx_home: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("broken-exec", _Broken())]))
    with pytest.raises(StepFailed, match="broken executor: the cluster refused the job") as caught:
        engine.run_tags("demo,data", {"size": "100"}, executor="broken")
    assert caught.value.exit_code == 2  # the executor refused its input (a UsageError)
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error" and document["error"]["node"] is None
    assert "no such partition 'gpu'" in document["error"]["message"]


class _Failing:
    @staticmethod
    def _run(request: Any) -> Any:
        raise CmxError("the image did not build: exit status 1")

    @hookimpl
    def cmx_register_executors(self, register: Any) -> None:
        register(Executor(name="failing", summary="its image does not build", run=self._run))


def test_an_executor_that_fails_on_its_own_is_a_failed_run_exit_1(cmx_home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The README: 1 a run failed (an image that does not build is a failed run), 2 bad input."""
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("failing-exec", _Failing())]))
    with pytest.raises(StepFailed, match="failing executor: the image did not build") as caught:
        engine.run_tags("demo,data", {"size": "100"}, executor="failing")
    assert caught.value.exit_code == 1
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error"
