"""cmx: a recipe engine for reproducible ML benchmarking.

The typed Python API is :mod:`cmx_core.api` (``from cmx_core.api import run, plan``); the
layers below it are subpackages, mapped in ``docs/architecture.md``. This module holds only
the version, so that ``import cmx_core`` costs nothing and imports nothing.
"""

__version__ = "0.1.0"
