"""Turning a SUT's ``sut_params`` mapping into a typed config dataclass.

Unknown keys and values of the wrong type are refused with one line naming the SUT and
the key, so a typo in a recipe's ``sut_params`` never passes silently.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from cmx_mlperf.llm.errors import UsageError

T = TypeVar("T")


def parse_params(cls: type[T], params: Mapping[str, Any], sut: str) -> T:
    """Build dataclass ``cls`` from ``params``; ``None`` values mean "use the default"."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in params.items():
        if key not in known:
            raise UsageError(f"sut {sut}: unknown sut_params key {key!r}; known: {', '.join(sorted(known))}")
        if value is None:
            continue
        values[key] = _coerce(value, hints[key], f"sut {sut}: sut_params.{key}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required field is missing
        raise UsageError(f"sut {sut}: {exc}") from None


def _coerce(value: Any, hint: Any, where: str) -> Any:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    options = tuple(o for o in options if o is not type(None))
    base = typing.get_origin(options[0]) or options[0]
    try:
        if base is bool:
            return _to_bool(value)
        if base in (int, float, str):
            if base is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return base(value)
        if base in (list, tuple):
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise ValueError(value)
            return tuple(str(v) for v in value)
    except (TypeError, ValueError):
        raise UsageError(f"{where} must be {getattr(base, '__name__', base)}, got {value!r}") from None
    return value


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)
