"""Where cmx keeps its state. cmx writes only here, to ``--output`` and to environments
it installs into — never to the current directory or to package directories.

``CMX_HOME`` puts everything under one directory (tests use it); otherwise
``CMX_CACHE_DIR`` / ``CMX_DATA_DIR`` or the platform's user cache and data directories.
The ``*_root`` functions return strings and import nothing (the warm-run replay uses them);
the others return :class:`pathlib.Path`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def _resolved(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _root(variable: str, under_home: str, platform_dir: str) -> str:
    """``$variable``, else ``$CMX_HOME/under_home``, else the platform's user directory."""
    explicit = os.environ.get(variable)
    if explicit:
        return _resolved(explicit)
    home = os.environ.get("CMX_HOME")
    if home:
        return os.path.join(_resolved(home), under_home)
    import platformdirs  # deferred: platformdirs only when this runs (32 modules)

    return str(getattr(platformdirs, platform_dir)("cmx", appauthor=False))


def cache_root() -> str:
    """The cache root: content-addressed entries, the recipe index, detected facts."""
    return _root("CMX_CACHE_DIR", "cache", "user_cache_dir")


def data_root() -> str:
    """The data root: run directories and the results database."""
    return _root("CMX_DATA_DIR", "data", "user_data_dir")


def cache_dir() -> Path:
    from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

    return Path(cache_root())


def data_dir() -> Path:
    from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

    return Path(data_root())


def runs_dir() -> Path:
    return data_dir() / "runs"


RESULTS_DB = "results.sqlite"


def results_db() -> Path:
    return data_dir() / RESULTS_DB
