"""cmx-core's own plugin: the ``shell``, ``python`` and ``cmx.facts`` step types, the
minimal detectors, the ``local`` executor, and the demo chain's step functions.

It sits above :mod:`cmx_core.run` (the local executor is the run layer's) and is loaded by
module name by :mod:`cmx_core.plugins.loader`, the way entry-point plugins are.
"""
