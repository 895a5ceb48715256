"""Which plugin a query needs: the registry says which recipe tags each plugin provides.

``missing_plugin_hint(tags)`` runs on the resolver's "no recipe has any of the tags" path, so
it reads ``registry.yaml`` without schema validation and never raises. A plugin that is
installed but failed to load is named with the command that shows why.
"""

from __future__ import annotations

from collections.abc import Iterable

from cmx_core.plugins import loader as plugins
from cmx_core.plugins.install import installed_distributions, shell_line
from cmx_core.plugins.registry_yaml import _entries_from, _load_yaml, normalize, registry_path


def missing_plugin_hint(tags: Iterable[str]) -> str:
    """``"; plugin cmx-mlperf provides recipes tagged mlperf,inference,*: cmx plugins install
    cmx-mlperf"`` for a query no installed recipe matches but a registry entry would, or ""."""
    wanted = {t.strip() for t in tags if t.strip() and not t.startswith("-")}
    try:

        entries = _entries_from(_load_yaml(registry_path()), registry_path())
    except Exception:  # noqa: BLE001 - a broken registry must not hide the original error
        return ""
    found = [(e, p) for e in entries for p in e.provides.recipes if _covers(p, wanted)]
    found = [(e, p) for e, p in found if e.state != "deprecated"] or found
    if not found:
        return ""
    entry, pattern = found[0]
    broken = _failed_plugin(entry.distribution)
    if broken is not None:
        return (f"; plugin {entry.name} provides recipes tagged {pattern} and is installed but failed to load: "
                f"{broken[1]} (see `cmx plugins info {broken[0]}`)")
    if _installed(entry.distribution):
        off = _turned_off(entry.distribution)
        return (f"; plugin {entry.name} provides recipes tagged {pattern} and is installed but turned off "
                f"({off})") if off else ""

    command = shell_line(["cmx", "plugins", "install", entry.name])
    return f"; plugin {entry.name} provides recipes tagged {pattern}: {command}"


def _covers(pattern: str, wanted: set[str]) -> bool:
    """A pattern's fixed tags all in the query (the query may add variation tags)."""
    fixed = [t for t in pattern.split(",") if t != "*"]
    return bool(fixed) and all(t in wanted for t in fixed)


def _installed(distribution: str) -> bool:
    return normalize(distribution) in installed_distributions()


def _failed_plugin(distribution: str) -> tuple[str, str] | None:
    """(entry-point name, error) of a plugin of ``distribution`` that failed to load."""
    loaded = plugins._REGISTRY
    if loaded is None:
        return None
    for name, info in loaded.plugins.items():
        if normalize(info.distribution) == normalize(distribution) and info.error:
            return name, info.error
    return None


def _turned_off(distribution: str) -> str:
    """How an installed plugin of ``distribution`` is kept from loading (``--disable-plugin``
    / ``CMX_DISABLE_PLUGINS``, or left out of ``CMX_LOAD_PLUGINS``), or ""."""
    names = {e.name for e in plugins._discover() if normalize(e.distribution) == normalize(distribution)}
    disabled = (plugins._names("CMX_DISABLE_PLUGINS") or set()) & names
    if disabled:
        return f"CMX_DISABLE_PLUGINS or --disable-plugin names {', '.join(sorted(disabled))}"
    wanted = plugins._names("CMX_LOAD_PLUGINS")
    if wanted is not None and not wanted & names:
        return f"CMX_LOAD_PLUGINS does not name {', '.join(sorted(names))}"
    return ""
