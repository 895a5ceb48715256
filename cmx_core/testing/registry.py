"""The plugin registry as the engine holds it, for a plugin's tests (re-exported on purpose;
not named ``plugins.py``, which would replace the kit's own ``plugins`` global on import).

* ``get_registry``: the registry the engine uses (loaded once per process), to check the
  providers a plugin registered the way cmx sees them (``executor_problems`` and the like).
* ``load_registry``: a freshly loaded registry, e.g. for the result suites it declares.
* ``reset_registry``: forget the loaded registry, so that the next command reloads the
  plugins (after a test changed what they see, such as the facts).
* ``registry_events``: the event sink that calls a registry's event hooks, for a test that
  records a run by hand as the engine would.
"""

from __future__ import annotations

from cmx_core.plugins.events import registry_events
from cmx_core.plugins.loader import get_registry, load_registry, reset_registry

__all__ = ["get_registry", "load_registry", "registry_events", "reset_registry"]
