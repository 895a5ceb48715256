"""Plugins: the pluggy hook specs, the registry of loaded providers and the executor
contract, entry-point loading, ``registry.yaml`` and its checks, installing, hints, extras,
and event hooks fired one implementation at a time.

May import :mod:`cmx_core.plan` and everything below it (a request to an executor carries
the plan). It never imports :mod:`cmx_core.run`: cmx-core's own plugin
(:mod:`cmx_core.builtin`) is loaded by module name, like every other plugin.
"""
