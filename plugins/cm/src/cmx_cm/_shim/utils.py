"""The ``utils`` module MLC's customize.py files import with ``from utils import *``."""

from __future__ import annotations

from typing import Any

__all__ = ["download_file", "is_false", "is_true", "unzip_file"]


def is_true(value: Any) -> bool:
    return str(value).lower() in ("true", "yes", "on", "1")


def is_false(value: Any) -> bool:
    return str(value).lower() in ("false", "no", "off", "0", "")


def download_file(i: dict[str, Any]) -> dict[str, Any]:
    """MLC's ``download_file`` (``url``, ``filename``, ``path``...): CM's utils action of the
    same name, served by :mod:`cmx_cm.actions`."""
    from cmx_cm.actions import access  # deferred: the runner sets its context first

    return access({**i, "action": "download_file", "automation": "utils"})


def unzip_file(i: dict[str, Any]) -> dict[str, Any]:
    """MLC's ``unzip_file`` (``filename``, ``path``, ``strip_folders``), as CM's utils action."""
    from cmx_cm.actions import access  # deferred: as download_file

    return access({**i, "action": "unzip_file", "automation": "utils"})
