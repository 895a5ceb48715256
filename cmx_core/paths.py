"""Where cmx keeps its state. cmx writes only here, to ``--output`` and to environments
it installs into — never to the current directory or to package directories.

``CMX_HOME`` puts everything under one directory (tests use it); otherwise
``CMX_CACHE_DIR`` / ``CMX_DATA_DIR`` or the platform's user cache and data directories.
"""

from __future__ import annotations

import os
from pathlib import Path


def _home() -> Path | None:
    home = os.environ.get("CMX_HOME")
    return Path(home).expanduser().resolve() if home else None


def cache_dir() -> Path:
    """The cache root: content-addressed entries, the recipe index, detected facts."""
    explicit = os.environ.get("CMX_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    home = _home()
    if home:
        return home / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir("cmx", appauthor=False))


def data_dir() -> Path:
    """The data root: run directories and the results database."""
    explicit = os.environ.get("CMX_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    home = _home()
    if home:
        return home / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir("cmx", appauthor=False))


def runs_dir() -> Path:
    return data_dir() / "runs"


def results_db() -> Path:
    return data_dir() / "results.sqlite"
