"""``cmx sweep``: a parameter matrix, one normal run per point, on any executor, and the
batch path through an executor's ``run_many``.

May import :mod:`cmx_core.run` and everything below it.
"""
