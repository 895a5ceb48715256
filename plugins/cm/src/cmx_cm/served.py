"""The ``cmind.access`` actions cmx-cm serves, as (automation alias, action) pairs: what
:mod:`cmx_cm.actions` answers and what the import report (:mod:`cmx_cm.access_scan`) checks
a ``customize.py`` against, in a module of its own so the report need not load the actions."""

from __future__ import annotations

SERVED_CALLS: tuple[tuple[str, str], ...] = (
    ("script", "run"), ("script", "search"), ("script", "find"), ("utils", "download_file"),
    ("utils", "unzip_file"), ("utils", "system"), ("utils", "compare_versions"),
)
