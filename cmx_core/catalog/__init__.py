"""The catalog: where recipes are (``--recipes``, ``CMX_RECIPES_PATH``, plugins, the core
collection), the persistent stat-validated index, shadowing, and what the resolver reads of
each recipe once (its scan).

May import :mod:`cmx_core.recipes` and the bottom helpers; never the resolver or anything above.
"""
