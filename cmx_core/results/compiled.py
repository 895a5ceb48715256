"""JSON Schema validators compiled on first use and cached in the cmx cache directory.

Validation runs on every run (a warm cached run included), so it must cost well under a
millisecond and never import ``jsonschema``. cmx compiles each schema (the result envelope,
every suite's section) to Python with ``fastjsonschema`` the first time it is needed and
keeps the code object in ``<cache>/validators/``, keyed by the schema's digest, the
generator's version and the Python version. Nothing generated is checked in, so the
validator cannot go stale or depend on whichever generator a maintainer had installed.

The generated code raises :class:`SchemaViolation` (its message names the path as
``data.a.b``). When ``fastjsonschema`` is missing or cannot compile a schema, cmx falls back
to ``jsonschema`` (tens of milliseconds, same messages' shape) rather than fail a run.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import re
import sys

from cmx_core import paths
from cmx_core.datautil import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Validator = Callable[[Any], Any]

GENERATOR = "fastjsonschema"
GENERATOR_VERSION = "2.22.3"
"""The generator cmx-core pins exactly (``fastjsonschema==2.22.3`` in pyproject.toml)."""
CODEGEN_REVISION = "1"
"""Bump when the way code is generated or post-processed changes (invalidates caches)."""
CACHE_SUBDIR = "validators"

_IMPORT_LINE = r"^(?:from decimal import Decimal|from fastjsonschema import .*)$"
_ENTRY = r"^def (\w+)\(data"
_DEFINITION = r", definition=.*(, rule=(?:'\w+'|None)\))$"
"""Each raise repeats the whole schema (``definition=``): 100 kB of code cmx never reads."""
_MEMO: dict[str, Validator] = {}
"""Validators of this process by schema digest."""


class SchemaViolation(ValueError):
    """A document that does not match its schema; ``message`` names the path (``data.a``)."""

    def __init__(self, message: str, value: Any = None, name: str | None = None,
                 definition: Any = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.rule = rule


class _ManyViolations(ValueError):
    """Only raised with fast_fail=False, which cmx never uses."""


class _NoDecimal:
    """Result documents are JSON data: never ``decimal.Decimal`` (importing it costs ~3 ms)."""


def schema_digest(schema: Mapping[str, Any]) -> str:
    """sha256 of the schema's canonical JSON."""
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(digest: str) -> str:
    """The cache entry name of a schema digest: generator, revision and Python included."""
    parts = (digest, GENERATOR, GENERATOR_VERSION, CODEGEN_REVISION, sys.implementation.cache_tag or "")
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


def is_cached(digest: str) -> bool:
    """Whether a compiled validator for this schema digest is in memory or on disk."""
    return digest in _MEMO or os.path.isfile(_cache_file(cache_key(digest)))


def validator(schema: Mapping[str, Any] | None = None, *, digest: str = "",
              load: Callable[[], Mapping[str, Any]] | None = None) -> Validator:
    """The compiled validator of ``schema`` (or of ``load()``, called only on a cache miss).

    ``digest`` (from :func:`schema_digest`, or any stable digest of the schema's source)
    avoids re-serialising the schema on every call.
    """
    digest = digest or schema_digest(_given(schema, load))
    found = _MEMO.get(digest)
    if found is None:
        key = cache_key(digest)
        found = _load(key) or _build(_given(schema, load), key)
        _MEMO[digest] = found
    return found


def _given(schema: Mapping[str, Any] | None, load: Callable[[], Mapping[str, Any]] | None) -> Mapping[str, Any]:
    if schema is not None:
        return schema
    if load is None:
        raise TypeError("validator() needs a schema or a load function")
    return load()


DIR_ENV = "CMX_VALIDATORS_DIR"
"""Where compiled validators are kept instead of ``<cache>/validators``: they derive only from
the schema, the generator and the Python, so homes and caches can share one directory (the
test suite does: a fresh ``CMX_HOME`` per test would otherwise compile them on every run)."""


def _cache_file(key: str) -> str:
    folder = os.environ.get(DIR_ENV) or os.path.join(paths.cache_root(), CACHE_SUBDIR)
    return os.path.join(folder, f"{key}.bin")


def _load(key: str) -> Validator | None:
    try:
        with open(_cache_file(key), "rb") as handle:
            header, _, blob = handle.read().partition(b"\n")
        name = header.decode("ascii")
        return _exec(marshal.loads(blob), name)
    except (OSError, ValueError, EOFError, TypeError, KeyError, UnicodeDecodeError):
        return None  # absent or damaged: compile again


def _build(schema: Mapping[str, Any], key: str) -> Validator:
    try:
        source, name = generate(schema)
    except ImportError:
        return _reference_validator(schema)
    except Exception:  # noqa: BLE001 - a generator failure must not fail the run
        return _reference_validator(schema)
    code = compile(source, f"<cmx validator {key}>", "exec")
    _store(key, name, code)
    return _exec(code, name)


def generate(schema: Mapping[str, Any]) -> tuple[str, str]:
    """Python source of a validator for ``schema`` and its entry function's name."""
    import fastjsonschema  # deferred: fastjsonschema only when this runs (21 modules)

    source = fastjsonschema.compile_to_code(dict(schema), use_default=False, use_formats=False)
    source = re.sub(_IMPORT_LINE, "", source, flags=re.MULTILINE)
    source = re.sub(_DEFINITION, r"\1", source, flags=re.MULTILINE)
    entry = re.search(_ENTRY, source, flags=re.MULTILINE)
    if entry is None:
        raise RuntimeError("fastjsonschema output has no validation function")
    return source, entry.group(1)


def _exec(code: Any, name: str) -> Validator:
    namespace: dict[str, Any] = {
        "__name__": "cmx_core.results._generated",
        "JsonSchemaValueException": SchemaViolation,
        "JsonSchemaValuesException": _ManyViolations,
        "Decimal": _NoDecimal,
    }
    exec(code, namespace)
    function: Validator = namespace[name]
    return function


def _store(key: str, name: str, code: Any) -> None:
    target = _cache_file(key)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        atomic_write(target, name.encode("ascii") + b"\n" + marshal.dumps(code))
    except (OSError, TypeError):
        pass  # an unwritable cache only costs the compile next time


def _reference_validator(schema: Mapping[str, Any]) -> Validator:
    """``jsonschema`` as a slow fallback, raising :class:`SchemaViolation` like the generated code."""
    import jsonschema  # deferred: jsonschema only when this runs (115 modules)

    checker = jsonschema.validators.validator_for(schema)(schema)

    def validate(data: Any) -> Any:
        error = jsonschema.exceptions.best_match(checker.iter_errors(data))
        if error is not None:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            raise SchemaViolation(f"data{where} {error.message}", name=f"data{where}")
        return data

    return validate
