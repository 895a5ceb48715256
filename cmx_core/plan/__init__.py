"""The plan: the resolved DAG in topological order, each node with its cache key, and
its views (what ``cmx plan`` shows, the read-only facts view templates see).

May import :mod:`cmx_core.resolve`, :mod:`cmx_core.cache` and everything below them.
"""
