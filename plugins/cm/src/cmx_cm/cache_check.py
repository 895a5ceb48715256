"""Whether a ``cm.script`` cache entry still holds: the check the cache and the warm-run
replay call before they serve it. A module of its own, importing only the standard library,
so that a replayed run loads none of the bridge's step, translator or cmx-core's plugin API.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM", "VIRTUAL_ENV")
"""The variables a script runner child gets from cmx's environment (with every ``CMX_*``)."""


CHECK_LIMIT_S = 300.0
"""How long a ``validate_cache.sh`` check may run when its step has no time limit (MLC sets
none; a check that hangs would hold every run that looks the entry up)."""


def runner_env() -> dict[str, str]:
    """The environment of a script runner child: :data:`PASSED_ENV` and ``CMX_*`` only."""
    return {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith("CMX_")}


def script_files(directory: Path) -> list[Path]:
    """The files a script's behaviour depends on (its top-level files, sorted)."""
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.endswith((".pyc", ".md")))


def script_stamp(directory: Path) -> str:
    """A cheap stat stamp (name, size, mtime_ns of each file) used to revalidate caches."""
    parts = []
    for path in script_files(directory):
        st = path.stat()
        parts.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def plain(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (frozen mappings and tuples as dicts and lists)."""
    return json.loads(json.dumps(value, default=lambda v: dict(v) if isinstance(v, Mapping) else list(v)))


def still_valid(outputs: Mapping[str, Any]) -> bool:
    """A cache hit is good while the script's files are unchanged, the file the script said
    it depends on (``*_GET_DEPENDENT_CACHED_PATH``, CM's and MLC's stale-detection key, in
    its new_env or its whole env) exists, and MLC's ``validate_cache.sh`` finds the version
    recorded."""
    script = outputs.get("script") or {}
    directory = Path(str(script.get("dir", "")))
    if not directory.is_dir() or script_stamp(directory) != script.get("stamp"):
        return False
    new_env = outputs.get("new_env") or {}
    dependent = [str(v) for k, v in new_env.items() if k.endswith("_GET_DEPENDENT_CACHED_PATH") and v]
    dependent += [str(script["dependent_path"])] if script.get("dependent_path") else []
    if not all(os.path.exists(path) for path in dependent):
        return False
    check = script.get("validate_cache")
    return True if not check else version_holds(directory, str(script.get("prefix") or "MLC"), check,
                                                script.get("timeout_s"))


def version_holds(directory: Path, prefix: str, check: Mapping[str, Any], timeout_s: Any) -> bool:
    """MLC's ``validate_cache.sh`` check: run it with the entry's env, and the entry is stale
    when customize.py's ``detect_version`` then finds a version other than the one recorded.
    As in MLC, a check that fails or finds no version keeps the entry; so does one that runs
    past the step's time limit (:data:`CHECK_LIMIT_S` without one), which is stopped."""
    limit = float(timeout_s) if timeout_s else CHECK_LIMIT_S
    with tempfile.TemporaryDirectory(prefix="cmx-cm-validate-") as work:
        req_path, res_path = Path(work) / "cm-request.json", Path(work) / "cm-result.json"
        req_path.write_text(json.dumps({**plain(check), "script_dir": str(directory), "work_dir": work,
                                        "prefix": prefix, "timeout_s": limit}))
        try:
            checked([sys.executable, "-I", "-m", "cmx_cm.runner", "--validate", str(req_path), str(res_path)],
                    Path(work), limit + 30)
            found = json.loads(res_path.read_text())
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return True
    detected, recorded = str(found.get("version") or ""), str(check.get("version") or "")
    return not (found.get("ok") and detected and recorded and detected != recorded)


def checked(argv: list[str], work: Path, limit: float) -> None:
    """Run a check in a process group of its own, and end with that group killed: what the
    check left running, or all of it when it runs past ``limit`` (TimeoutExpired) or cmx is
    stopped meanwhile (Ctrl-C, SIGTERM)."""
    with subprocess.Popen(argv, cwd=work, env=runner_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        try:
            proc.wait(timeout=limit)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
