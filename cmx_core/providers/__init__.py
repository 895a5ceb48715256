"""The plugin contract's values: what a plugin registers (:class:`StepType`,
:class:`Detector`, :class:`Suite`, ...), what a step is handed and returns, the typed
outcome of a run, and importable references to callables.

The very bottom: it imports nothing of cmx-core but :mod:`cmx_core.errors`. Plugins use
these names through :mod:`cmx_core.api`.
"""
