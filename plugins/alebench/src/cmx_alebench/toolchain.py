"""The judge's C++ toolchain as ALE-Bench's judge has it, read from a root filesystem.

ALE-Bench compiles C++ with g++ 12 plus the AtCoder Library, Boost, GMP and Eigen, with
``-march=native``, and judge version 202510 adds C++23. cmx compiles with the ``g++`` of the
judge's root (the host's ``/usr`` for the sandbox judge, the same for the docker judge; the
``containers/ale-bench-judge`` image holds the same Debian packages), adds ``-march=native``,
``-DONLINE_JUDGE -DATCODER``, Eigen's include path and GMP's libraries where they are
installed, and offers ``cpp23`` where that g++ accepts ``-std=gnu++23``. Which libraries the
toolchain holds is recorded in every result (``ale_bench.toolchain``); the AtCoder Library is
not packaged by Debian, so it is recorded as absent unless ``/opt/ac-library`` (ALE-Bench's
path) or ``/usr/include/atcoder`` holds it; ``/opt/ac-library`` is then mounted into the compile
(:func:`cpp_binds`), since the sandbox judge sees only the root's ``/usr``. A judge image's root,
which cannot hold it, borrows the host's ``/opt/ac-library`` (:func:`borrows_atcoder`).

A :class:`Toolchain` names the root the judge compiles in: the host's (the default) or the
root filesystem of a judge image exported into the cmx cache (``judge_image.py``), whose g++
is asked for its version and C++23 through the judge's own runner, inside that root.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GXX = "/usr/bin/g++"
ATCODER_DIRS = ("/opt/ac-library", "/usr/include")
ATCODER_NOTE = ("the AtCoder Library is not packaged by Debian; ALE-Bench's judge images have it at "
                "/opt/ac-library, where cmx uses it when present")


def _define(path: Path, name: str) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(rf"^#\s*define\s+{name}\s+(\S+)", text, re.M)
    return match.group(1).strip('"') if match else None


def boost_version(root: Path = Path("/")) -> str | None:
    value = _define(root / "usr/include/boost/version.hpp", "BOOST_LIB_VERSION")
    return value.replace("_", ".") if value else None


def gmp_version(root: Path = Path("/")) -> str | None:
    include = root / "usr/include"
    header = next((p for p in (include / "gmp.h", *sorted(include.glob("*/gmp.h"))) if p.is_file()), None)
    if header is None or not (root / "usr/include/gmpxx.h").is_file():
        return None
    parts = [_define(header, f"__GNU_MP_VERSION{suffix}") for suffix in ("", "_MINOR", "_PATCHLEVEL")]
    return ".".join(p for p in parts if p) or None


def eigen_version(root: Path = Path("/")) -> str | None:
    macros = root / "usr/include/eigen3/Eigen/src/Core/util/Macros.h"
    parts = [_define(macros, f"EIGEN_{part}_VERSION") for part in ("WORLD", "MAJOR", "MINOR")]
    return ".".join(p for p in parts if p) if all(parts) else None


def atcoder_dir(root: Path = Path("/")) -> str | None:
    for folder in ATCODER_DIRS:
        if (root / folder.lstrip("/") / "atcoder" / "all").is_file():
            return folder
    return None


HOST_ROOT = Path("/")
"""The host's root, where a judge image that lacks the AtCoder Library borrows it from."""


def borrows_atcoder(root: Path) -> bool:
    """Whether a judge image's root lacks the AtCoder Library that the host has at
    ``/opt/ac-library``: Debian does not package it, so the image cannot hold it, and the
    compile then mounts the host's there, read-only, where AtCoder's flags look."""
    return root != HOST_ROOT and atcoder_dir(root) is None and atcoder_dir(HOST_ROOT) == ATCODER_DIRS[0]


def _atcoder_path(root: Path) -> str | None:
    """Where the compile finds the AtCoder Library: the root's own, or the host's it borrows."""
    return ATCODER_DIRS[0] if borrows_atcoder(root) else atcoder_dir(root)


Probe = Callable[[Sequence[str], str], "tuple[int, str] | None"]
"""Runs ``argv`` (inside the toolchain's root) with a stdin text: (exit code, stdout), None if it could not run."""


def host_probe(argv: Sequence[str], stdin: str) -> tuple[int, str] | None:
    """The host's own programs, run directly."""
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout


@functools.lru_cache(maxsize=8)
def gxx_accepts(std: str, gxx: str = GXX, probe: Probe = host_probe) -> bool:
    done = probe([gxx, f"-std={std}", "-fsyntax-only", "-x", "c++", "-"], "int main(){}\n")
    return done is not None and done[0] == 0


@functools.lru_cache(maxsize=4)
def gxx_version(gxx: str = GXX, probe: Probe = host_probe) -> str | None:
    done = probe([gxx, "-dumpfullversion"], "")
    return (done[1].strip() or None) if done is not None and done[0] == 0 else None


def cpp_flags(std: str, root: Path = Path("/")) -> tuple[list[str], list[str]]:
    """(flags before the source, libraries after it) for ``g++ -std=STD``."""
    before = [f"-std={std}", "-O2", "-DONLINE_JUDGE", "-DATCODER", "-march=native"]
    if eigen_version(root):
        before.append("-I/usr/include/eigen3")
    library = _atcoder_path(root)
    if library and library != "/usr/include":
        before.append(f"-I{library}")
    after = ["-lgmpxx", "-lgmp"] if gmp_version(root) else []
    return before, after


def cpp_binds(root: Path = Path("/")) -> dict[str, str]:
    """What the compile must see besides the root's ``/usr``: the AtCoder Library's folder
    (the sandbox judge mounts only ``/usr`` of the root, so ``-I/opt/ac-library`` alone finds nothing)."""
    if borrows_atcoder(root):
        return {str(HOST_ROOT / ATCODER_DIRS[0].lstrip("/")): ATCODER_DIRS[0]}
    library = atcoder_dir(root)
    if library is None or library == "/usr/include":
        return {}
    return {str(root / library.lstrip("/")): library}


@dataclass(frozen=True)
class Toolchain:
    """Where the judge's compilers and libraries come from: ``root`` as seen from the host
    (``/``, or an exported image root), the image it was exported from (``image``, its engine
    ``image_id``; None for the host) and how programs of that root are run (``probe``)."""

    root: Path = Path("/")
    image: str | None = None
    image_id: str | None = None
    probe: Probe = host_probe

    @property
    def source(self) -> str:
        return "host" if self.image is None else "image"

    def accepts(self, std: str) -> bool:
        return gxx_accepts(std, GXX, self.probe)

    def flags(self, std: str) -> tuple[list[str], list[str]]:
        return cpp_flags(std, self.root)

    def binds(self) -> dict[str, str]:
        return cpp_binds(self.root)


HOST = Toolchain()


def libraries(chain: Toolchain = HOST) -> dict[str, Any]:
    """What the toolchain holds and where it is from, as every result records it."""
    root = chain.root
    return {"source": chain.source, "image": chain.image, "image_id": chain.image_id,
            "gxx": gxx_version(GXX, chain.probe), "cpp23": chain.accepts("gnu++23"), "march": "native",
            "boost": boost_version(root), "gmp": gmp_version(root), "eigen": eigen_version(root),
            "atcoder_library": _atcoder_path(root), "notes": _notes(root)}


def _notes(root: Path) -> list[str]:
    if borrows_atcoder(root):
        return [f"the AtCoder Library is the host's {ATCODER_DIRS[0]}, mounted read-only: the image has none"]
    return [] if atcoder_dir(root) else [ATCODER_NOTE]
