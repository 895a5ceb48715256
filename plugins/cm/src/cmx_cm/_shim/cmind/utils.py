"""The few ``cmind.utils`` helpers CM scripts' ``customize.py`` call, written for cmx-cm.

Put on ``sys.path`` of the script runner only (never installed as ``cmind``), so scripts that
``from cmind import utils`` run without cmind. Every helper keeps CM's calling convention:
keyword arguments in, a dict with ``return`` (0 ok, 16 not found, 1 error) out.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

Result = dict[str, Any]


def load_txt(file_name: str, encoding: str = "utf8", remove_after_read: bool = False,
             check_if_exists: bool = False, split: bool = False, match_text: str = "",
             fail_if_no_match: str = "", debug: bool = False) -> Result:
    """Read a text file; ``split`` adds ``list`` (lines), ``match_text`` adds ``match``."""
    if check_if_exists and not os.path.isfile(file_name):
        return {"return": 16, "error": f"{file_name} was not found"}
    with open(file_name, encoding=encoding) as handle:
        text = handle.read()
    if remove_after_read:
        os.remove(file_name)
    out: Result = {"return": 0, "string": text}
    if split:
        out["list"] = text.split("\n")
    if match_text:
        match = re.search(match_text, text)
        if fail_if_no_match and match is None:
            return {"return": 1, "error": fail_if_no_match, "string": text}
        out["match"] = match
    return out


def save_txt(file_name: str, string: str = "", encoding: str = "utf8") -> Result:
    with open(file_name, "w", encoding=encoding) as handle:
        handle.write(string)
    return {"return": 0}


def load_json(file_name: str, check_if_exists: bool = False, encoding: str = "utf8") -> Result:
    if check_if_exists and not os.path.isfile(file_name):
        return {"return": 16, "error": f"{file_name} was not found"}
    try:
        with open(file_name, encoding=encoding) as handle:
            return {"return": 0, "meta": json.load(handle)}
    except (OSError, ValueError) as exc:
        return {"return": 1, "error": f"problem loading {file_name}: {exc}"}


def safe_load_json(path: str, file_name: str = "", encoding: str = "utf8") -> Result:
    full = os.path.join(path, file_name) if file_name else path
    result = load_json(full, encoding=encoding)
    return result if result["return"] == 0 else {"return": 0, "meta": {}}


def save_json(file_name: str, meta: Any = None, indent: int = 2, sort_keys: bool = True,
              encoding: str = "utf8") -> Result:
    with open(file_name, "w", encoding=encoding) as handle:
        json.dump({} if meta is None else meta, handle, indent=indent, sort_keys=sort_keys)
        handle.write("\n")
    return {"return": 0}


def load_yaml(file_name: str, check_if_exists: bool = False, encoding: str = "utf8") -> Result:
    import yaml  # deferred: yaml only when this runs (24 modules)

    if check_if_exists and not os.path.isfile(file_name):
        return {"return": 16, "error": f"{file_name} was not found"}
    with open(file_name, encoding=encoding) as handle:
        return {"return": 0, "meta": yaml.safe_load(handle)}


def save_yaml(file_name: str, meta: Any = None, sort_keys: bool = True, encoding: str = "utf8") -> Result:
    import yaml  # deferred: yaml only when this runs (24 modules)

    with open(file_name, "w", encoding=encoding) as handle:
        yaml.safe_dump({} if meta is None else meta, handle, sort_keys=sort_keys)
    return {"return": 0}


def load_yaml_and_json(file_name_without_ext: str, check_if_exists: bool = False, encoding: str = "utf8") -> Result:
    """Merge ``NAME.yaml`` and ``NAME.json`` (JSON wins), as CM does for metadata."""
    meta: dict[str, Any] = {}
    found = False
    for ext, loader in ((".yaml", load_yaml), (".json", load_json)):
        path = file_name_without_ext + ext
        if os.path.isfile(path):
            result = loader(path)
            if result["return"] > 0:
                return result
            meta.update(result["meta"] or {})
            found = True
    if not found and check_if_exists:
        return {"return": 16, "error": f"{file_name_without_ext}.yaml/.json not found"}
    return {"return": 0, "meta": meta}


def merge_dicts(i: dict[str, Any]) -> Result:
    """Merge ``dict2`` into ``dict1`` in place; ``append_lists``/``append_unique`` for lists."""
    first, second = i["dict1"], i["dict2"]
    for key, value in second.items():
        current = first.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merge_dicts({**i, "dict1": current, "dict2": value})
        elif isinstance(current, list) and isinstance(value, list) and i.get("append_lists"):
            for item in value:
                if not i.get("append_unique") or item not in current:
                    current.append(item)
        else:
            first[key] = value
    return {"return": 0, "dict1": first}


def convert_env_to_dict(s: str) -> Result:
    """``KEY=VALUE`` lines -> dict. Like CM, only the text up to a second ``=`` is kept."""
    out: dict[str, str] = {}
    for line in s.split("\n"):
        line = line.strip()
        if line:
            parts = line.split("=")
            out[parts[0].strip()] = parts[1].strip() if len(parts) > 1 else ""
    return {"return": 0, "dict": out}


def compare_versions(version1: str, version2: str) -> int:
    """1, 0 or -1, comparing dot-separated parts numerically where both are digits."""
    def parts(version: str) -> list[int | str]:
        return [int(p) if p.isdigit() else p for p in str(version).split(".")]

    a, b = parts(version1), parts(version2)
    for index in range(max(len(a), len(b))):
        x = a[index] if index < len(a) else 0
        y = b[index] if index < len(b) else 0
        if type(x) is not type(y):
            x, y = str(x), str(y)
        if x > y:  # type: ignore[operator]
            return 1
        if x < y:  # type: ignore[operator]
            return -1
    return 0


def check_if_true_yes_on(env: dict[str, Any], key: str) -> bool:
    return str(env.get(key, "")).lower() in ("true", "yes", "on")


def check_if_none_false_no_off(env: dict[str, Any], key: str) -> bool:
    return str(env.get(key, "")).lower() in ("none", "false", "no", "off")


def gen_uid() -> Result:
    import uuid  # deferred: every script runner imports this module

    return {"return": 0, "uid": uuid.uuid4().hex[:16]}


def get_current_date_time(i: dict[str, Any]) -> Result:
    from datetime import datetime, timezone  # deferred: every script runner imports this module

    now = datetime.now(timezone.utc)
    return {"return": 0, "iso_datetime": now.isoformat(), "datetime": now}


def debug_here(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("cmind.utils.debug_here (remote debugging) is not available under cmx-cm")
