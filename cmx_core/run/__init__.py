"""Running a plan: the engine (the typed API behind every CLI command), the local
executor, the steps' processes, measurements in the cache, recording results, the warm-run
replay and its memo, in-flight and killed runs, lock files and drift, and the base of the
remote executors.

May import :mod:`cmx_core.plugins` and everything below it; never the CLI, sweeps, reports
or bundles.
"""
