"""The recipe model: the typed, immutable recipe, YAML loading with line tracking, the
checks that give file:line:key errors, sandboxed templates and the ``when:`` expressions.

The bottom of the engine's layers: it may import :mod:`cmx_core.errors`, :mod:`cmx_core.datautil`
and :mod:`cmx_core.providers` only. It never runs anything.
"""
