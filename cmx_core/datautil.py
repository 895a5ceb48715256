"""Small helpers over plain nested data (mappings, lists, scalars)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:  # import-light: the warm-run replay uses these helpers
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any


def freeze(value: Any) -> Any:
    """A deep read-only copy: mappings become MappingProxyType, lists become tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON-ready data from a frozen value (paths become strings)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def to_plain(value: Any) -> Any:
    """Dataclasses, paths, tuples and sets to JSON-ready data (what a detector returns
    becomes what the fact cache stores)."""
    if hasattr(type(value), "__dataclass_fields__") and not isinstance(value, type):
        import dataclasses  # deferred: start-up: 15 modules not needed to start cmx

        return to_plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def digest(value: Any) -> str:
    """sha256 of the canonical JSON form of ``value`` (cache keys, fact and output digests)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def iter_strings(value: Any) -> Iterator[str]:
    """Every string inside ``value``, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from iter_strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_strings(v)


def atomic_write(target: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``target`` through a unique temporary file in the same directory
    and ``os.replace``: readers see the old file or the new one, never half of it. The
    directory is created if needed; an OSError leaves no temporary file behind."""
    path = os.fspath(target)
    directory, name = os.path.split(path)
    os.makedirs(directory or ".", exist_ok=True)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


MAX_JSON_BYTES = 64 << 20
"""The largest JSON file cmx reads as input (a facts file, a lock, a cache record)."""
MAX_JSON_DEPTH = 100
"""How deep a JSON input may nest: deeper data would reach Python's recursion limit later."""


class JSONLimitError(ValueError):
    """A JSON input past :data:`MAX_JSON_BYTES` or :data:`MAX_JSON_DEPTH` (a ValueError, so
    every reader that treats malformed JSON as such refuses it the same way)."""


def read_capped(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of the file at ``path``: every file a user gives cmx
    (facts, locks, recipes, bundles' members, results) is read with a bound before it is
    parsed, so ``/dev/zero`` or a huge file costs one bounded read, never all memory. A
    result longer than ``max_bytes`` means the file is larger: the caller refuses it."""
    with open(path, "rb") as handle:
        return handle.read(max_bytes + 1)


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The file at ``path``, or a :class:`JSONLimitError` when it is larger than ``max_bytes``."""
    data = read_capped(path, max_bytes)
    if len(data) > max_bytes:
        raise JSONLimitError(f"larger than {max_bytes:,} bytes")
    return data


def loads_bounded(text: str | bytes, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for input cmx did not write itself, or may find corrupted: too large or
    nested too deep is a :class:`JSONLimitError` (a ValueError), never a RecursionError."""
    if len(text) > max_bytes:
        raise JSONLimitError(f"larger than {max_bytes:,} bytes")
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONLimitError(f"nests deeper than {max_depth} levels") from None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise JSONLimitError(f"nests deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return value
