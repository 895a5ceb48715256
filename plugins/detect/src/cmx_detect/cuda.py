"""CUDA toolkit search: every toolkit on the machine, the selected one, and why.

The ``nvcc`` on PATH may be a symlink or a wrapper script (``exec /usr/local/cuda-13.0/bin/nvcc
"$@"``): it is followed to the real compiler before ``dirname(dirname(nvcc))`` is taken, and a
candidate home is accepted only if ``include/cuda.h`` exists under it. Selection order:
``CMX_OVERRIDE_CUDA`` (a version, conda-style), ``CUDA_HOME``/``CUDA_PATH``, the first ``nvcc``
on PATH, ``/usr/local/cuda``, then the newest toolkit in the standard locations.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass, field

from cmx_core.errors import UsageError
from cmx_detect.facts import CudaFacts, CudaSelection, CudaToolkit, RejectedCandidate
from cmx_detect.fingerprints import CUDA_ENV_HOMES, CUDA_STANDARD_ROOTS
from cmx_detect.source import Source
from cmx_detect.versions import normalise

ENV_HOMES = CUDA_ENV_HOMES
STANDARD_ROOTS = CUDA_STANDARD_ROOTS
MAX_WRAPPER_BYTES = 16 * 1024
MAX_WRAPPER_DEPTH = 5
_EXEC_TARGET = re.compile(r"""(?:^|[\s"'=])(/[^\s"'$;|&]*?/nvcc)(?=$|[\s"';|&])""", re.MULTILINE)
_NVCC_RELEASE = re.compile(r"release\s+([\d.]+),\s*V([\d.]+)")
_CUDA_H_VERSION = re.compile(r"#define\s+CUDA_VERSION\s+(\d+)")


@dataclass
class _Candidate:
    home: str
    found_via: str
    nvcc: str | None = None


@dataclass
class _Search:
    toolkits: dict[str, CudaToolkit] = field(default_factory=dict)
    rejected: list[RejectedCandidate] = field(default_factory=list)
    order: list[tuple[str, str]] = field(default_factory=list)  # (home, found_via) by priority


def resolve_nvcc(src: Source, path: str) -> tuple[str, list[str]]:
    """Follow symlinks and wrapper scripts from ``path`` to the real ``nvcc``.

    Returns the final path and what was followed (``["wrapper script"]``, ``["symlink"]``).
    A wrapper is a small text file starting with ``#!`` that names another absolute
    ``.../nvcc``; at most five hops are followed.
    """
    hops: list[str] = []
    current = src.realpath(path)
    if current != path:
        hops.append("symlink")
    for _ in range(MAX_WRAPPER_DEPTH):
        target = _wrapper_target(src, current)
        if target is None or src.realpath(target) == current:
            break
        hops.append("wrapper script")
        current = src.realpath(target)
    return current, hops


def _wrapper_target(src: Source, path: str) -> str | None:
    st = src.stat(path)
    if st is None or st.size > MAX_WRAPPER_BYTES:
        return None
    text = src.read_text(path) or ""
    if not text.startswith("#!"):
        return None
    match = _EXEC_TARGET.search(text)
    return match.group(1) if match else None


def _home_of(nvcc: str) -> str:
    return posixpath.dirname(posixpath.dirname(nvcc))


def _candidates(src: Source) -> list[_Candidate]:
    found: list[_Candidate] = []
    for var in ENV_HOMES:
        value = src.env(var)
        if value:
            found.append(_Candidate(value, f"{var}={value}"))
    for on_path in src.which_all("nvcc"):
        real, hops = resolve_nvcc(src, on_path)
        via = f"PATH:{on_path}" + (f" ({', '.join(hops)} -> {real})" if hops else "")
        found.append(_Candidate(_home_of(real), via, real))
        if hops and _home_of(on_path) != _home_of(real):
            # What a naive dirname(dirname(nvcc)) would give; recorded as rejected if wrong.
            found.append(_Candidate(_home_of(on_path), f"dirname(dirname({on_path}))"))
    for root in STANDARD_ROOTS:
        for name in src.listdir(root):
            if name == "cuda" or name.startswith("cuda-"):
                found.append(_Candidate(posixpath.join(root, name), f"standard location {root}/{name}"))
    return found


def _version(src: Source, home: str, nvcc: str | None) -> tuple[str | None, str | None]:
    """Version from ``version.json``, else ``nvcc --version``, else ``CUDA_VERSION`` in cuda.h."""
    text = src.read_text(posixpath.join(home, "version.json"))
    if text:
        try:
            return str(json.loads(text)["cuda"]["version"]), "version.json"
        except (json.JSONDecodeError, KeyError, TypeError):
            pass
    if nvcc:
        result = src.run(f"nvcc-version:{nvcc}", [nvcc, "--version"], timeout_s=10)
        match = _NVCC_RELEASE.search(result.stdout) if result.ok else None
        if match:
            return match.group(2), "nvcc --version"
    header = src.read_text(posixpath.join(home, "include", "cuda.h")) or ""
    match = _CUDA_H_VERSION.search(header)
    if match:
        number = int(match.group(1))
        return f"{number // 1000}.{number % 1000 // 10}", "include/cuda.h"
    return None, None


def _examine(src: Source, cand: _Candidate, search: _Search) -> None:
    home = src.realpath(cand.home)
    if home in search.toolkits:
        search.toolkits[home].found_via.append(cand.found_via)
        search.order.append((home, cand.found_via))
        return
    include = posixpath.join(home, "include")
    if not src.is_file(posixpath.join(include, "cuda.h")):
        search.rejected.append(RejectedCandidate(cand.home, cand.found_via, f"no include/cuda.h under {home}"))
        return
    nvcc = cand.nvcc or _nvcc_in(src, home)
    raw, version_source = _version(src, home, nvcc)
    version = normalise(raw)
    lib = next((posixpath.join(home, d) for d in ("lib64", "lib") if src.is_dir(posixpath.join(home, d))), None)
    search.toolkits[home] = CudaToolkit(home=home, version=version.version, version_source=version_source,
                                        nvcc=nvcc, include_dir=include,
                                        lib_dir=src.realpath(lib) if lib else None,
                                        found_via=[cand.found_via], version_raw=version.raw)
    search.order.append((home, cand.found_via))


def _nvcc_in(src: Source, home: str) -> str | None:
    path = posixpath.join(home, "bin", "nvcc")
    return src.realpath(path) if src.is_file(path) else None


def _version_key(version: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version or ""))


def _select(search: _Search) -> tuple[CudaSelection | None, str]:
    if not search.order:
        return None, "no CUDA toolkit found (no CUDA_HOME, no nvcc on PATH, no /usr/local/cuda*)"
    for home, via in search.order:
        if not via.startswith("standard location"):
            tk = search.toolkits[home]
            return _selection(tk, via), f"selected {home}: first found via {via}"
    preferred = [(h, via) for h, via in search.order if via.endswith("/cuda")]
    if preferred:
        tk = search.toolkits[preferred[0][0]]
        return _selection(tk, preferred[0][1]), f"selected {tk.home}: {preferred[0][1]} (the cuda link)"
    newest = max(search.toolkits.values(), key=lambda t: _version_key(t.version))
    return _selection(newest, "newest"), f"selected {newest.home}: newest toolkit in the standard locations"


def _selection(tk: CudaToolkit, source: str) -> CudaSelection:
    return CudaSelection(version=tk.version, home=tk.home, nvcc=tk.nvcc, source=source, version_raw=tk.version_raw)


def detect_cuda(src: Source) -> CudaFacts:
    search = _Search()
    for cand in _candidates(src):
        _examine(src, cand, search)
    selected, reason = _select(search)
    override = os.environ.get("CMX_OVERRIDE_CUDA")
    if override is not None:
        selected, reason = _override(override, search)
    return CudaFacts(toolkits=list(search.toolkits.values()), selected=selected, reason=reason,
                     rejected=search.rejected)


def check_override(value: str) -> str:
    """The stripped ``CMX_OVERRIDE_CUDA`` value, or a usage error for a malformed one."""
    value = value.strip()
    if value and not re.fullmatch(r"\d+(\.\d+){0,2}", value):
        raise UsageError(f"CMX_OVERRIDE_CUDA={value}: expected a CUDA version such as 12.4 (or empty for none)")
    return value


def _override(value: str, search: _Search) -> tuple[CudaSelection | None, str]:
    """``CMX_OVERRIDE_CUDA=12.4`` pretends CUDA 12.4; an empty value pretends no CUDA."""
    value = check_override(value)
    if not value:
        return None, "CMX_OVERRIDE_CUDA is empty: no CUDA toolkit"
    match = next((t for t in search.toolkits.values()
                  if t.version and (t.version + ".").startswith(value + ".")), None)
    home = match.home if match else None
    return (CudaSelection(version=value, home=home, nvcc=match.nvcc if match else None,
                          source="CMX_OVERRIDE_CUDA"),
            f"CMX_OVERRIDE_CUDA={value}" + (f" (matches {home})" if home else " (no such toolkit here)"))
