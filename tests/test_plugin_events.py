"""Event hooks are called one implementation at a time: a failing one is named (plugin, hook,
error) and never stops the others; wrappers, tryfirst and trylast keep pluggy's order."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from cmx_core.api import hookimpl
from cmx_core.plugins import loader as plugins
from cmx_core.plugins.events import registry_events


def _observer(log: list[str], tag: str, *, fail: bool = False, **opts: bool) -> SimpleNamespace:
    @hookimpl(**opts)
    def cmx_node_started(node_id: str, recipe: str, cached: bool) -> None:
        log.append(f"{tag}:{node_id}")
        if fail:
            raise ValueError(f"{tag} is broken")

    return SimpleNamespace(cmx_node_started=cmx_node_started)


def _wrapper(log: list[str]) -> SimpleNamespace:
    @hookimpl(wrapper=True)
    def cmx_node_started(node_id: str, recipe: str, cached: bool) -> Iterator[None]:
        log.append("wrap:before")
        yield
        log.append("wrap:after")

    return SimpleNamespace(cmx_node_started=cmx_node_started)


def _load(monkeypatch: pytest.MonkeyPatch, *extra: tuple[str, object]) -> plugins.Registry:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=list(extra))
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    return registry


def test_one_failing_hook_never_silences_the_others(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log: list[str] = []
    registry = _load(monkeypatch, ("first", _observer(log, "first")), ("broken", _observer(log, "broken", fail=True)),
                     ("last", _observer(log, "last")))
    registry_events(registry)("cmx_node_started", node_id="n", recipe="r", cached=False)
    assert sorted(log) == ["broken:n", "first:n", "last:n"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cmx: warning: plugin 'broken': its cmx_node_started hook failed: ValueError: broken is broken"]


def test_call_event_isolates_too(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    log: list[str] = []
    _load(monkeypatch, ("a", _observer(log, "a", fail=True)), ("b", _observer(log, "b", fail=True)),
          ("c", _observer(log, "c")))
    plugins.call_event("cmx_node_started", node_id="x", recipe="r", cached=True)
    assert sorted(log) == ["a:x", "b:x", "c:x"]
    err = capsys.readouterr().err
    assert "plugin 'a': its cmx_node_started hook failed" in err and "plugin 'b': its" in err


def test_wrappers_surround_and_tryfirst_trylast_order(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    registry = _load(monkeypatch, ("late", _observer(log, "late", trylast=True)), ("plain1", _observer(log, "plain1")),
                     ("early", _observer(log, "early", tryfirst=True)), ("plain2", _observer(log, "plain2")),
                     ("wrap", _wrapper(log)))
    registry_events(registry)("cmx_node_started", node_id="n", recipe="r", cached=False)
    # pluggy's order: wrappers around everything, tryfirst, the rest last-registered first, trylast
    assert log == ["wrap:before", "early:n", "plain2:n", "plain1:n", "late:n", "wrap:after"]


def test_a_failing_implementation_does_not_stop_a_wrapper_resuming(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log: list[str] = []
    registry = _load(monkeypatch, ("broken", _observer(log, "broken", fail=True)), ("wrap", _wrapper(log)))
    registry_events(registry)("cmx_node_started", node_id="n", recipe="r", cached=False)
    assert log == ["wrap:before", "broken:n", "wrap:after"]
    assert "plugin 'broken'" in capsys.readouterr().err
