"""Dataclass facts to JSON data and back, with one-line errors naming the key at fault."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar, Union

from cmx_core.errors import CmxError

T = TypeVar("T")


class FactsError(CmxError):
    """A facts document (file, fixture) that does not have the documented shape."""


def to_data(value: Any) -> Any:
    """JSON data of a fact dataclass (or a plain value)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def from_data(cls: type[T], data: Any, where: str) -> T:
    """Build ``cls`` (a fact dataclass) from JSON ``data``; ``where`` names the source
    (e.g. ``facts.json: facts.gpus``) for the error message. Unknown keys are ignored
    (a newer cmx-detect may add keys); missing required keys and wrong types are errors."""
    result: T = _convert(cls, data, where)
    return result


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _convert_union(typing.get_args(tp), data, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(data, list):
            raise FactsError(f"{where}: expected a list, got {type(data).__name__}")
        return [_convert(item, x, f"{where}[{i}]") for i, x in enumerate(data)]
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, data, where)
    return _convert_scalar(tp, data, where)


def _convert_union(args: tuple[Any, ...], data: Any, where: str) -> Any:
    if data is None:
        if type(None) in args:
            return None
        raise FactsError(f"{where}: must not be null")
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _convert(arg, data, where)
        except FactsError as err:
            errors.append(str(err))
    raise FactsError(errors[0] if errors else f"{where}: unexpected value")


def _convert_dataclass(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise FactsError(f"{where}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise FactsError(f"{where}: missing key '{f.name}'")
    return cls(**kwargs)


_SCALARS: dict[Any, tuple[type, ...]] = {
    str: (str,), bool: (bool,), int: (int,), float: (int, float),
}


def _convert_scalar(tp: Any, data: Any, where: str) -> Any:
    allowed = _SCALARS.get(tp)
    if allowed is None:
        raise FactsError(f"{where}: unsupported type {tp!r}")
    ok = isinstance(data, allowed) and not (tp is not bool and isinstance(data, bool))
    if not ok:
        raise FactsError(f"{where}: expected {tp.__name__}, got {type(data).__name__} {data!r:.40}")
    return float(data) if tp is float else data
