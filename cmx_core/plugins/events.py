"""Event hooks (``cmx_node_started``, ``cmx_node_finished``, ``cmx_node_failed``, ``cmx_result_written``) fired
for one registry: the stages that fire events are handed an :data:`EventSink` instead of
reaching for the global plugin registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cmx_core.plugins.hook_calls import fire as fire_each

if TYPE_CHECKING:
    from cmx_core.plugins.registry import Registry


class EventSink(Protocol):
    """Fires the event hook ``name`` with keyword arguments; never raises for an observer."""

    def __call__(self, name: str, /, **kwargs: Any) -> None: ...


def registry_events(registry: Registry) -> EventSink:
    """An event sink calling ``registry``'s event hooks one implementation at a time
    (:func:`cmx_core.plugins.hook_calls.fire`): a failing observer is reported on stderr with its
    plugin and hook, the other plugins' hooks still run, and the run goes on."""

    def fire(name: str, /, **kwargs: Any) -> None:
        fire_each(getattr(registry.hook, name), kwargs)

    return fire


def no_events(name: str, /, **kwargs: Any) -> None:
    """An event sink that fires nothing (the far side of tests, tools)."""
