"""How each language is compiled and run, as argument lists inside the judge's file system.

The source is compiled in the writable ``/work`` of the compile call; that directory is then
mounted read-only at ``/sol`` for every case. Rust needs a host toolchain (``rustc`` on PATH): its sysroot is
mounted read-only at ``/rust``, and the crates of AtCoder's set that Debian packages, built once
for that rustc (:mod:`cmx_alebench.rust_crates`), at ``/crates``. With a judge image's toolchain
(:class:`~cmx_alebench.toolchain.Toolchain` from an exported image root) C++ is that root's g++
and headers, Rust that root's ``/usr/bin/rustc`` with the crates the image built for it
(:func:`~cmx_alebench.rust_crates.image_crate_set`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cmx_alebench.rust_crates import CRATES_AT, CrateSet, crate_set, explain_missing, image_crate_set
from cmx_alebench.toolchain import GXX, HOST, Toolchain
from cmx_core.errors import UsageError

SOL = "/sol"
BUILD = "/work"
RUST_AT = "/rust"  # top level: bwrap makes the parents of a nested mount point 0700


@dataclass(frozen=True)
class Language:
    """One code language: its source file name, compile command (None: nothing to build) and run command."""

    name: str
    source: str
    compile: tuple[str, ...] | None
    run: tuple[str, ...]
    binds: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    crates: CrateSet | None = None

    def compile_message(self, text: str) -> str:
        """A failed compile's output, with the crate it asked for and this judge lacks named first."""
        return explain_missing(text, self.crates) if self.name == "rust" else text


def _cpp(name: str, std: str, chain: Toolchain) -> Language:
    """g++ with ALE-Bench's judge flags and libraries where installed (see :mod:`cmx_alebench.toolchain`)."""
    if std == "gnu++23" and not chain.accepts(std):
        where = "the host's" if chain.image is None else f"image {chain.image}'s"
        raise UsageError(f"--language {name}: {where} g++ ({GXX}) does not accept -std={std}; pick cpp20")
    before, after = chain.flags(std)
    return Language(name, "main.cpp", (GXX, *before, "-o", f"{BUILD}/a.out", f"{BUILD}/main.cpp", *after),
                    (f"{SOL}/a.out",), binds=chain.binds())


def rust_sysroot() -> Path | None:
    """The sysroot of the first ``rustc`` on PATH that answers (rustup's proxy resolved), or
    None without Rust. A rustup proxy that cannot answer (no default toolchain for this HOME)
    does not hide a working rustc later on PATH, e.g. Debian's ``/usr/bin/rustc``."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        rustc = shutil.which("rustc", path=folder) if folder else None
        root = _sysroot(rustc) if rustc else None
        if root is not None:
            return root
    return None


def _sysroot(rustc: str) -> Path | None:
    try:
        out = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    root = Path(out.stdout.strip())
    return root if (root / "bin" / "rustc").is_file() else None


def _rust(chain: Toolchain, cache: Path | None) -> Language:
    if chain.image is not None:
        if not (chain.root / "usr/bin/rustc").exists():
            raise UsageError(f"--language rust: image {chain.image} has no /usr/bin/rustc; build it from "
                             "containers/ale-bench-judge")
        built = image_crate_set(chain.root)
        return Language("rust", "main.rs", ("/usr/bin/rustc", "--edition", "2021", "-C", "opt-level=3",
                                            "-C", "linker=/usr/bin/gcc", *(built.rustc_args() if built else ()),
                                            "-o", f"{BUILD}/a.out", f"{BUILD}/main.rs"),
                        (f"{SOL}/a.out",), crates=built)
    root = rust_sysroot()
    if root is None:
        raise UsageError("--language rust needs rustc on PATH (install Rust with rustup or apt-get install rustc)")
    crates = _crates(root / "bin" / "rustc", cache)
    binds = {os.fspath(root): RUST_AT, **({os.fspath(crates.deps): CRATES_AT} if crates else {})}
    return Language("rust", "main.rs",
                    (f"{RUST_AT}/bin/rustc", "--edition", "2021", "-C", "opt-level=3",
                     "-C", "linker=/usr/bin/gcc",  # not `cc`: its /etc/alternatives link is unreadable inside
                     *(crates.rustc_args() if crates else ()),
                     "-o", f"{BUILD}/a.out", f"{BUILD}/main.rs"), (f"{SOL}/a.out",), binds=binds, crates=crates)


def _crates(rustc: Path, cache: Path | None) -> CrateSet | None:
    """The solution crates for ``rustc`` (None without a cache to build them in, or where they
    cannot be built: then a solution compiles with the standard library alone, as the log says)."""
    if cache is None:
        return None
    try:
        return crate_set(rustc, cache)
    except (RuntimeError, OSError) as exc:
        logging.getLogger("cmx.step").warning("alebench: Rust solutions compile without crates: %s", exc)
        return None


PY_CHECK = "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
"""Python's "compile": a syntax check (a syntax error is a COMPILATION_ERROR), writing nothing."""

NAMES = ("python", "cpp17", "cpp20", "cpp23", "rust")


def language(name: str, chain: Toolchain = HOST, cache: Path | None = None) -> Language:
    """The language ``name`` compiled with ``chain``; a UsageError lists the choices. With
    ``cache``, Rust gets AtCoder's crates (those this machine packages), built there once."""
    if name == "python":
        return Language("python", "main.py", ("/usr/bin/python3", "-c", PY_CHECK, f"{BUILD}/main.py"),
                        ("/usr/bin/python3", f"{SOL}/main.py"), env={"PYTHONDONTWRITEBYTECODE": "1"})
    if name == "cpp17":
        return _cpp(name, "gnu++17", chain)
    if name == "cpp20":
        return _cpp(name, "gnu++20", chain)
    if name == "cpp23":
        return _cpp(name, "gnu++23", chain)
    if name == "rust":
        return _rust(chain, cache)
    raise UsageError(f"--language {name!r} is not supported; pick one of {', '.join(NAMES)}")
