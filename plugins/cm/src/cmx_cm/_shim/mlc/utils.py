"""``mlc.utils``: the same helpers as the cmind shim (MLC kept CM's calling convention)."""

from __future__ import annotations

from importlib import import_module

_impl = import_module("cmind.utils")  # the sibling shim on the runner's sys.path
globals().update({name: getattr(_impl, name) for name in dir(_impl) if not name.startswith("_")})
