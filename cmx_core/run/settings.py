"""Executor settings: ``--executor-opt KEY=VALUE`` checked and converted against the
dataclass an executor declares (see :class:`cmx_core.providers.types.ExecutorSettings`).

Supported field types: ``str``, ``int``, ``float``, ``bool``, ``Literal[...]`` choices,
``X | None`` (``none`` or an empty value gives None) and ``tuple[str, ...]`` (a comma
list). Anything else is a plugin bug, reported when the settings are described.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar, Union, get_args, get_origin

from cmx_core.errors import PluginError, UsageError, did_you_mean
from cmx_core.providers.types import ExecutorSettings

S = TypeVar("S", bound=ExecutorSettings)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingInfo(NamedTuple):
    """One setting as ``cmx plugins info`` shows it."""

    name: str
    type: str
    default: str
    help: str


def parse_settings(executor: str, cls: type[S], raw: Mapping[str, Any]) -> S:
    """An instance of ``cls`` from the user's options; a one-line UsageError names the
    executor, the key and what is accepted."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise UsageError(_unknown(executor, str(key), list(fields)))
        values[name] = value if not isinstance(value, str) else convert(executor, name, _hints(cls)[name], value)
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{executor} executor: {exc}") from None


def describe_settings(cls: type[ExecutorSettings]) -> list[SettingInfo]:
    """Each setting's name, type, default and help (``metadata={"help": ...}``)."""
    hints = _hints(cls)
    rows = []
    for field in dataclasses.fields(cls):
        rows.append(SettingInfo(field.name, type_name(hints[field.name]), _default(field),
                                str(field.metadata.get("help", ""))))
    return rows


def _hints(cls: type[ExecutorSettings]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:  # noqa: BLE001 - a plugin's unresolvable annotation
        raise PluginError(f"settings {cls.__qualname__}: cannot resolve the field types: {exc}") from None


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "(required)"


def _unknown(executor: str, key: str, known: list[str]) -> str:
    hint = did_you_mean(key.replace("-", "_"), known, n=1)
    listed = ", ".join(known) if known else "none"
    return f"{executor} executor: unknown option '{key}'{hint} (its options: {listed}; see 'cmx plugins info')"


def convert(executor: str, name: str, kind: Any, text: str) -> Any:
    """``text`` as a value of type ``kind`` (see the module docstring)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType) and type(None) in args:
        if text.strip().lower() in ("", "none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        return convert(executor, name, rest[0] if len(rest) == 1 else Union[tuple(rest)], text)  # noqa: UP007
    if origin is typing.Literal:
        if text not in [str(a) for a in args]:
            raise UsageError(f"{executor} executor option {name}={text!r}: use one of "
                             f"{', '.join(str(a) for a in args)}")
        return next(a for a in args if str(a) == text)
    if origin is tuple:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    return _scalar(executor, name, kind, text)


def _scalar(executor: str, name: str, kind: Any, text: str) -> Any:
    if kind is bool:
        lowered = text.strip().lower()
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        raise UsageError(f"{executor} executor option {name}={text!r}: use true or false")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            wanted = "an integer" if kind is int else "a number"
            raise UsageError(f"{executor} executor option {name}={text!r}: use {wanted}") from None
    if kind is str:
        return text
    raise PluginError(f"{executor} executor: option {name} has type {type_name(kind)}, which "
                      "--executor-opt cannot give (use str, int, float, bool, a Literal, X | None or tuple[str, ...])")


def type_name(kind: Any) -> str:
    """A short readable type, e.g. ``float | None`` or ``one of: a, b``."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if origin is tuple:
        return "comma list"
    if kind is type(None):
        return "None"
    return getattr(kind, "__name__", str(kind))
