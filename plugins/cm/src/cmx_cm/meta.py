"""Reading CM/CMX and MLC script metadata: ``_cm.yaml``/``_cm.json`` (CM) or ``meta.yaml`` (MLC).

A script directory holds one metadata file plus ``customize.py`` and ``run.sh``. The two
flavours differ in the file name and the env prefix (``CM_`` or ``MLC_``); the keys are the
same. Nothing here imports ``cmind`` or ``mlc``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cmx_cm.cache_check import script_files
from cmx_core.errors import UsageError

Flavor = Literal["cm", "mlc"]
META_FILES: tuple[tuple[str, Flavor], ...] = (("_cm.yaml", "cm"), ("_cm.json", "cm"), ("meta.yaml", "mlc"))
SKIP_DIRS = frozenset({"__pycache__", ".git", "node_modules"})


@dataclass(frozen=True)
class ScriptMeta:
    """One script: its directory, metadata file, flavour and the parsed (never mutated) data."""

    directory: Path
    meta_file: Path
    flavor: Flavor
    data: Mapping[str, Any]

    @property
    def prefix(self) -> str:
        """The env prefix the script's variables use: ``CM`` or ``MLC``."""
        return "CM" if self.flavor == "cm" else "MLC"

    @property
    def alias(self) -> str:
        return str(self.data.get("alias") or self.directory.name)


def _yaml_load(text: str) -> Any:
    import yaml  # deferred: yaml only when this runs (27 modules)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def find_meta_file(directory: Path) -> tuple[Path, Flavor] | None:
    """The metadata file of a script directory, or None when it is not a script."""
    for name, flavor in META_FILES:
        candidate = directory / name
        if candidate.is_file():
            return candidate, flavor
    return None


def load_script(directory: Path) -> ScriptMeta:
    """Parse one script directory's metadata; a malformed file is a one-line UsageError."""
    found = find_meta_file(directory)
    if found is None:
        raise UsageError(f"{directory}: no _cm.yaml, _cm.json or meta.yaml; point at a CM or MLC script directory")
    path, flavor = found
    import yaml  # deferred: yaml only when this runs (27 modules)

    try:
        text = _read_capped(path)
        data = json.loads(text) if path.suffix == ".json" else _yaml_load(text)
        _check_expanded_size(data, path)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({_one_line(exc)}); fix the file") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be script metadata; fix the file") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot be read as script metadata ({_one_line(exc)}); fix the file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: script metadata must be a mapping, got {type(data).__name__}")
    _check_lists(data, path, "")
    for section in ("variations", "versions"):
        entries = data.get(section)
        for name, entry in entries.items() if isinstance(entries, dict) else ():
            if isinstance(entry, dict):
                _check_lists(entry, path, f"{section}.{name}.")
    return ScriptMeta(directory=directory, meta_file=path, flavor=flavor, data=data)


def _check_lists(data: Mapping[str, Any], path: Path, where: str) -> None:
    for key in LIST_KEYS:
        value = data.get(key)
        if value and not isinstance(value, list | str):
            raise UsageError(f"{path}: {where}{key} must be a list, got {type(value).__name__} ({value!r:.40}); "
                             "fix the file")


LIST_KEYS = ("deps", "post_deps", "prehook_deps", "posthook_deps", "new_env_keys", "new_state_keys", "clean_files",
             "local_env_keys")
"""Keys CM reads as lists; a number or ``true`` there is refused in one line (before, the
import failed with a traceback)."""


MAX_META_BYTES = 4 << 20
"""The largest metadata file read (the largest in cmx4mlops 1.0.1 is 50 KB)."""

MAX_META_NODES = 200_000
"""The most values a script's metadata may hold once YAML aliases are expanded (1,713 at
most in cmx4mlops 1.0.1): a few lines of ``&a [*b, *b, ...]`` (an alias bomb) would
otherwise expand to billions when the metadata is handed to the script runner as JSON
(10 GB of memory, measured)."""


def _read_capped(path: Path) -> str:
    with path.open("rb") as handle:
        raw = handle.read(MAX_META_BYTES + 1)
    if len(raw) > MAX_META_BYTES:
        raise ValueError(f"larger than {MAX_META_BYTES >> 20} MiB")
    return raw.decode("utf-8")


def _check_expanded_size(data: Any, path: Path) -> None:
    """Refuse metadata whose aliases expand past :data:`MAX_META_NODES` values, or refer to
    a node from inside it (infinitely deep). One pass over the distinct nodes: a shared node
    is sized once, however many aliases point at it."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            raise ValueError("an alias inside the node it refers to (the data would be infinitely deep)")
        open_nodes.add(id(node))
        total = 1 + sum(size(child) for child in (node.values() if isinstance(node, dict) else node))
        if total > MAX_META_NODES:
            raise ValueError(f"its aliases expand to more than {MAX_META_NODES} values (an alias bomb?); write "
                             "the values out")
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    size(data)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def script_dirs(root: Path) -> Iterator[Path]:
    """Every script directory under ``root`` (a collection, a repo or one script), sorted."""
    if find_meta_file(root) is not None:
        yield root
        return
    for dirpath, dirnames, _files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        here = Path(dirpath)
        if here != root and find_meta_file(here) is not None:
            dirnames[:] = []  # a script's own subfolders are its data, not more scripts
            yield here


def script_digest(directory: Path) -> str:
    """A sha256 over the script's files (names and contents): feeds the translated recipe, so
    a changed ``customize.py`` or ``run.sh`` changes the cache key."""
    digest = hashlib.sha256()
    for path in script_files(directory):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
