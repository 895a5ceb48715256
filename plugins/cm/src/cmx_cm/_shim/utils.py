"""The ``utils`` module MLC's customize.py files import with ``from utils import *``."""

from __future__ import annotations

from typing import Any

__all__ = ["is_false", "is_true"]


def is_true(value: Any) -> bool:
    return str(value).lower() in ("true", "yes", "on", "1")


def is_false(value: Any) -> bool:
    return str(value).lower() in ("false", "no", "off", "0", "")
