"""The resolver: tags to recipes, variations, typed inputs, version choice, requirements
and the plan-time checks of step parameters. Pure: given a catalog and facts, it touches
nothing on the machine.

May import :mod:`cmx_core.catalog`, :mod:`cmx_core.facts`, :mod:`cmx_core.recipes`,
:mod:`cmx_core.providers` and the bottom helpers.
"""
