"""Event hooks (``cmx_node_started``, ``cmx_node_finished``, ``cmx_result_written``) fired
for one registry: the stages that fire events are handed an :data:`EventSink` instead of
reaching for the global plugin registry."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cmx_core.plugins import Registry


class EventSink(Protocol):
    """Fires the event hook ``name`` with keyword arguments; never raises for an observer."""

    def __call__(self, name: str, /, **kwargs: Any) -> None: ...


def registry_events(registry: Registry) -> EventSink:
    """An event sink calling ``registry``'s event hooks; a failing observer is reported on
    stderr with its plugin's hook name and never stops the run."""

    def fire(name: str, /, **kwargs: Any) -> None:
        hook: Callable[..., Any] = getattr(registry.hook, name)
        try:
            hook(**kwargs)
        except Exception as exc:  # noqa: BLE001 - an observer's bug is not the run's
            text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            print(f"cmx: warning: a plugin's {name} hook failed: {type(exc).__name__}: {text}", file=sys.stderr)

    return fire


def no_events(name: str, /, **kwargs: Any) -> None:
    """An event sink that fires nothing (the far side of tests, tools)."""
