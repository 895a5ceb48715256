"""CM's ``cmind.access({...})`` actions, as a ``customize.py`` calls them under cmx-cm.

CM's whole API is one dict-in/dict-out call; scripts reach for it to download and unpack
files, run shell commands and run or find other scripts. The bridge serves the actions in
:data:`SERVED` with CM's inputs and outputs (docs/cm-bridge.md lists them with the scripts
each unlocks); any other is ``{'return': 1, 'error': ...}`` naming the action, which the
runner turns into one line. The script runner hands this module what a call needs (where
the collection's recipes are, the run's time limit) through :func:`cmx_cm.call_context.use`
once per process,
since ``cmind.access`` is a module-level function that scripts call with no context.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_cm import call_context
from cmx_cm._shim.cmind.utils import compare_versions
from cmx_cm.call_context import Context
from cmx_cm.child import ChildFailed, run_child
from cmx_cm.served import SERVED_CALLS
from cmx_core.errors import UsageError

Result = dict[str, Any]
CHUNK = 1 << 16
NOT_INPUTS = frozenset({"action", "automation", "tags", "env", "state", "quiet", "out", "silent", "v", "verbose",
                        "add_deps_recursive", "adr", "add_deps", "ad", "const", "const_state", "recursion_spaces",
                        "force_cache", "skip_cache", "cmd", "print_deps", "print_env"})
"""Keys of a ``run`` call that are CM's own options, not the script's inputs."""


def access(i: Mapping[str, Any]) -> Result:
    """``cmind.access(i)``: the served action, or CM's error dict naming the one that is not."""
    automation = str(i.get("automation") or "").split(",")[0]
    action = str(i.get("action") or "")
    handler = SERVED.get((automation, action))
    if handler is None:
        served = ", ".join(f"{a} {b}" for a, b in SERVED)
        return {"return": 1, "error": f"cmind.access({{'action': {action!r}, 'automation': {automation!r}}}) is not "
                                      f"available under cmx-cm (it serves: {served}); see docs/cm-bridge.md"}
    try:
        return handler(dict(i), call_context.current)
    except KeyError as exc:
        return {"return": 1, "error": f"cmind.access({action!r}): the input {exc} is missing"}


# -- utils ---------------------------------------------------------------------------------


def _verify(i: Mapping[str, Any], prefix: str) -> bool:
    for key in (f"{prefix}_UTILS_DOWNLOAD_VERIFY_SSL", "CM_UTILS_DOWNLOAD_VERIFY_SSL"):
        if key in os.environ:
            return os.environ[key] == "yes"
    return str(i.get("verify", True)).lower() not in ("false", "no", "0", "off")


def download_file(i: dict[str, Any], context: Context) -> Result:
    """CM's ``utils download_file``: ``url`` (http, https or file) to ``path``/``filename``
    (the working directory and the URL's last part by default); ``verify`` (or
    ``CM_UTILS_DOWNLOAD_VERIFY_SSL=no``) turns TLS verification off. Written beside the target
    and renamed, so a failed download leaves no half file."""
    import ssl  # deferred: a download only (the import report reads SERVED)
    import urllib.request  # deferred: as ssl

    url = str(i["url"])
    name = str(i.get("filename") or os.path.basename(urllib.parse.urlparse(url).path))
    if not name:
        return {"return": 1, "error": f"download_file: {url} names no file; give filename"}
    target = Path(str(i.get("path") or os.getcwd())) / name
    partial = target.with_name(target.name + ".cmx-part")
    tls = None if _verify(i, context.prefix) else ssl._create_unverified_context()
    print(f"Downloading to {target}\n", flush=True)
    try:
        with urllib.request.urlopen(url, context=tls, timeout=60) as response, partial.open("wb") as out:
            size = _copy(response, out, str(i.get("text", "Downloaded: ")), int(response.headers.get("Content-Length")
                                                                                or 0))
    except (OSError, ValueError) as exc:  # URLError is an OSError
        partial.unlink(missing_ok=True)
        return {"return": 1, "error": f"download of {url} failed: {_reason(exc)}"}
    partial.replace(target)
    return {"return": 0, "filename": name, "path": str(target), "size": size}


def _copy(response: Any, out: Any, text: str, expected: int) -> int:
    written = 0
    while chunk := response.read(CHUNK):
        out.write(chunk)
        written += len(chunk)
        if expected:
            sys.stdout.write(f"\r{text}{min(100.0, written * 100 / expected):3.0f}%")
    sys.stdout.write(f"\r{text}{100:3.0f}%\n")
    sys.stdout.flush()
    return written


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return " ".join(str(reason).split()) or type(exc).__name__


def unzip_file(i: dict[str, Any], context: Context) -> Result:
    """CM's ``utils unzip_file``: ``filename`` into ``path`` (the working directory by default),
    its first ``strip_folders`` folders dropped. A member that would land outside ``path``
    (``../``, an absolute name) is refused, not skipped."""
    import zipfile  # deferred: an unzip only (the import report reads SERVED)

    archive = Path(str(i["filename"]))
    if not archive.is_file():
        return {"return": 1, "error": f"file {archive} not found"}
    root = Path(str(i.get("path") or os.getcwd())).resolve()
    strip = int(i.get("strip_folders") or 0)
    try:
        with zipfile.ZipFile(archive) as opened:
            for info in opened.infolist():
                _extract(opened, info, root, strip)
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        return {"return": 1, "error": f"unzip_file {archive}: {_reason(exc)}"}
    return {"return": 0}


def _extract(opened: Any, info: Any, root: Path, strip: int) -> None:
    """One member of a :class:`zipfile.ZipFile`."""
    name = "/".join(info.filename.split("/")[strip:])
    if not name:
        return
    target = (root / name).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"the member {info.filename!r} would be written outside {root}")
    if info.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with opened.open(info) as source, target.open("wb") as out:
        shutil.copyfileobj(source, out)
    mode = info.external_attr >> 16
    if mode & 0o777:
        target.chmod(mode & 0o777)


def system(i: dict[str, Any], context: Context) -> Result:
    """CM's ``utils system``: the script's own shell command line (as its ``run.sh`` is), in
    ``path`` when given, with `` > STDOUT 2> STDERR`` appended as CM appends it (so, as in CM,
    the redirection takes the command line's last command), to the files ``stdout``/``stderr``
    when given and temporary ones otherwise. ``ret`` is the wait status ``os.system`` gives
    (exit code x 256); a failing command is still ``return: 0``, as in CM."""
    command = str(i["cmd"])
    if not command:
        return {"return": 1, "error": "cmd is empty"}
    cwd = str(i.get("path") or "")
    with tempfile.TemporaryDirectory(prefix="cmx-cm-system-") as scratch:
        files = [str(i.get(key) or os.path.join(scratch, key)) for key in ("stdout", "stderr")]
        line = f"{command} > {shlex.quote(files[0])} 2> {shlex.quote(files[1])}"
        # the script's own command line, given to sh as CM's os.system gives it (never cmx's inputs)
        done = subprocess.run(["/bin/sh", "-c", line], cwd=cwd if os.path.isdir(cwd) else None,
                              stdin=subprocess.DEVNULL, timeout=context.timeout_s, check=False)
        stdout, stderr = (Path(f).read_text(errors="replace").strip() if os.path.isfile(f) else "" for f in files)
    status = done.returncode << 8 if done.returncode >= 0 else -done.returncode
    return {"return": 0, "ret": status, "stdout": stdout, "stderr": stderr,
            "std": "\n".join(part for part in (stdout, stderr) if part)}


def compare(i: dict[str, Any], context: Context) -> Result:
    return {"return": 0, "comparison": compare_versions(str(i["version1"]), str(i["version2"]))}


# -- script --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """One script ``search``/``find`` returns: what scripts read of CM's artifact object."""

    path: str
    meta: Mapping[str, Any]

    @property
    def alias(self) -> str:
        return str(self.meta.get("alias") or os.path.basename(self.path))

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")


def search(i: dict[str, Any], context: Context) -> Result:
    """CM's ``script search``/``find`` by ``tags`` (``_name`` a variation), in CM's order."""
    from cmx_cm.cm_cli import choose  # deferred: the index only when a script searches
    from cmx_cm.meta import load_script  # deferred: as choose

    tags = str(i.get("tags") or "").replace(" ", ",")
    if context.recipe_dir is None:
        return {"return": 1, "error": "script search: this run has no collection to search (run it from 'cmx import "
                                      "cm' recipes or CMX_CM_PATH)"}
    try:
        first, others, _ = choose(tags, [context.recipe_dir])
    except UsageError:
        return {"return": 0, "list": []}
    found = [Found(entry.path, dict(load_script(Path(entry.path)).data)) for entry in [first, *others]]
    return {"return": 0, "list": found}


def run_script(i: dict[str, Any], context: Context) -> Result:
    """CM's ``script run``: the script CM's rule takes for ``tags``, run as a child ``cmx cm
    run script`` with the call's other keys as its inputs and ``env`` as its env; its
    ``new_env`` and ``new_state`` come back as CM returns them."""
    tags = str(i["tags"]).replace(" ", ",")
    if context.recipe_dir is None:
        return {"return": 1, "error": f"script run {tags}: this run has no collection to run it from"}
    inputs = {k: v for k, v in i.items() if k not in NOT_INPUTS and v is not None}
    env = {str(k): v for k, v in dict(i.get("env") or {}).items()}
    argv = ["cm", "run", "script", f"--tags={tags}", "--recipes", str(context.recipe_dir)]
    argv += [f"--{k}={_text(v)}" for k, v in sorted(inputs.items())]
    if env:
        argv.append("--cm_env=" + json.dumps(env, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps([tags, inputs, env], sort_keys=True, default=str).encode()).hexdigest()[:12]
    try:
        document = run_child(argv, f"{tags}#{digest}", f"cmind.access('run', tags {tags})", context.timeout_s)
    except ChildFailed as exc:
        return {"return": 1, "error": str(exc)}
    outputs = dict(document["outputs"])
    return {"return": 0, "new_env": dict(outputs.get("new_env") or {}), "new_state": dict(outputs.get("new_state")
                                                                                         or {}),
            "version": outputs.get("version") or ""}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else json.dumps(value)


SERVED: Mapping[tuple[str, str], Callable[[dict[str, Any], Context], Result]] = {
    ("script", "run"): run_script,
    ("script", "search"): search,
    ("script", "find"): search,
    ("utils", "download_file"): download_file,
    ("utils", "unzip_file"): unzip_file,
    ("utils", "system"): system,
    ("utils", "compare_versions"): compare,
}
"""(automation, action) -> the function serving it; an automation's ``alias,uid`` is taken by alias."""
assert tuple(SERVED) == SERVED_CALLS, "cmx_cm.served lists what this module serves"
