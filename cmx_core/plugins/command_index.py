"""Names and summaries of plugin commands, cached so that ``cmx --help`` needs no plugin
import. Import-light on purpose: stdlib only, and the records are :mod:`marshal` data (a
built-in module, nothing to import; ``json`` would cost ``cmx --help`` about 2 ms).

The record is valid while the plugin discovery fingerprint (``sys.path`` directories' mtimes,
cmx-core's version) and the mtimes of the plugin modules that registered the commands are
unchanged; otherwise the caller loads the plugins and writes a new record.
"""

from __future__ import annotations

import marshal
import os
import sys

from cmx_core import __version__, paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


FILE = "plugin-commands.v2.marshal"
DISCOVERY_FILE = "plugins.v1.json"
"""The plugin-discovery cache (written by :mod:`cmx_core.plugins.loader`, read by the replay)."""


def discovery_fingerprint() -> list[str]:
    """What plugin discovery depends on. sys.path[0] (the script's or working directory)
    is left out: it differs between ``cmx`` and ``python -m`` and holds no distributions."""
    return [__version__, os.environ.get("CMX_LOAD_PLUGINS", "<all>")] + [
        f"{p}:{_mtime(p)}" for p in sys.path[1:] if p]


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _cache_file(name: str = FILE) -> str:
    return os.path.join(paths.cache_root(), name)


def read_summaries() -> list[tuple[str, str]] | None:
    """The cached ``(name, summary)`` of every plugin command, or None when stale."""
    try:
        record = _read(FILE)
        if record["fingerprint"] != discovery_fingerprint():
            return None
        if any(_mtime(path) != mtime for path, mtime in record["files"].items()):
            return None
        return [(str(name), str(summary)) for name, summary in record["commands"]]
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None


def write_summaries(commands: list[tuple[str, str]], module_files: list[str]) -> None:
    record: dict[str, Any] = {
        "fingerprint": discovery_fingerprint(),
        "files": {path: _mtime(path) for path in module_files},
        "commands": commands,
    }
    _write(FILE, record)


def _read(name: str) -> Any:
    """A record written by :func:`_write`; OSError, ValueError or EOFError when unreadable."""
    with open(_cache_file(name), "rb") as handle:
        return marshal.load(handle)


def _write(name: str, record: dict[str, Any]) -> None:
    from cmx_core.datautil import atomic_write  # deferred: start-up: 5 modules not needed to start cmx

    try:
        atomic_write(_cache_file(name), marshal.dumps(record))
    except (OSError, ValueError):
        pass  # a cache: the next command computes it again


# -- the rendered top-level help ------------------------------------------------------------

HELP_FILE = "help.v2.marshal"


def terminal_width() -> int:
    """The columns :func:`shutil.get_terminal_size` reports (what argparse wraps help to),
    computed the same way without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


def _parser_file() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli", "parser.py")


def read_help(width: int) -> str | None:
    """``cmx --help`` as last rendered, if the commands, the parser and the width are the same."""
    summaries = read_summaries()
    if summaries is None:
        return None
    try:
        record = _read(HELP_FILE)
        if record["width"] != width or record["parser"] != _mtime(_parser_file()) \
                or [tuple(c) for c in record["commands"]] != summaries:
            return None
        return str(record["text"])
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None


def write_help(width: int, text: str) -> None:
    summaries = read_summaries()
    if summaries is not None:
        _write(HELP_FILE, {"width": width, "parser": _mtime(_parser_file()), "commands": summaries, "text": text})
