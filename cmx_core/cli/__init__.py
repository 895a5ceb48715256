"""The ``cmx`` command: argument parsing and printing only; every command calls a function
of :mod:`cmx_core.api` or of the layer below it, and every command has ``--json``.

The top layer: it may import anything; nothing imports it.
"""
