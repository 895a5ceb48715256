"""Conformance kit for plugin authors (a pytest plugin shipped with cmx-core).

Loaded by pytest through the ``pytest11`` entry point; importing it must stay cheap.
"""

from __future__ import annotations
