"""The crates a Rust solution may use, as AtCoder's judge offers them, built once for the judge's rustc.

AtCoder's Rust (the 2023 language update, which ALE-Bench's ``rust`` image follows) compiles a
submission inside a cargo project whose ``[dependencies]`` hold a fixed set of crates
(:data:`ATCODER_CRATES`). Here that set is whatever of it Debian packages (the ``librust-*-dev``
crates in ``/usr/share/cargo/registry``, read through cargo's source replacement, offline):
cargo builds them once per (rustc, registry content) into the cmx cache, and a solution is
compiled with plain ``rustc`` plus ``--extern`` for each built crate and the build's ``deps``
folder mounted read-only at :data:`CRATES_AT`. A crate of AtCoder's set this machine cannot
offer is named in the compile message (:func:`explain_missing`). The judge image
(``containers/ale-bench-judge``) builds the same set with its own cargo when it is built, into
:data:`IMAGE_CRATES` with cargo's messages beside it (:func:`image_crate_set`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.rust_build import DEBIAN_REGISTRY, available_versions

CRATES_AT = "/crates"
IMAGE_CRATES = "/usr/lib/ale-bench-crates"
"""Where the judge image holds its built crates (``deps/``, ``cargo-messages.json``): under
``/usr``, which the sandbox judge mounts from the image's root, so no bind is needed."""
BUILD_TIMEOUT_S = 1800.0
MAX_DROPPED = 8
"""At most this many crates that fail to build are left out (one cargo retry each) before giving up."""

ATCODER_CRATES = (
    "ac-library-rs", "once_cell", "static_assertions", "varisat", "memoise", "argio", "bitvec", "counter",
    "hashbag", "pathfinding", "recur-fn", "indexing", "amplify", "amplify_derive", "amplify_num", "easy-ext",
    "multimap", "btreemultimap", "bstr", "az", "glidesort", "tap", "omniswap", "multiversion", "num",
    "num-bigint", "num-complex", "num-integer", "num-iter", "num-rational", "num-traits", "num-derive",
    "ndarray", "nalgebra", "alga", "libm", "rand", "getrandom", "rand_chacha", "rand_core", "rand_hc",
    "rand_pcg", "rand_distr", "petgraph", "indexmap", "regex", "lazy_static", "ordered-float", "ascii",
    "permutohedron", "superslice", "itertools", "itertools-num", "maplit", "either", "im-rc", "fixedbitset",
    "bitset-fixed", "proconio", "text_io", "rustc-hash", "smallvec",
)
"""The crates of AtCoder's Rust judge (2023 language update), by their crates.io names."""

BOOKWORM_PACKAGED = (
    "once_cell", "static_assertions", "easy-ext", "multimap", "bstr", "tap", "num", "num-bigint", "num-complex",
    "num-integer", "num-iter", "num-rational", "num-traits", "num-derive", "libm", "rand", "getrandom",
    "rand_chacha", "rand_core", "rand_hc", "rand_pcg", "rand_distr", "petgraph", "indexmap", "regex",
    "lazy_static", "ordered-float", "ascii", "permutohedron", "itertools", "itertools-num", "maplit", "either",
    "im-rc", "fixedbitset", "rustc-hash", "smallvec",
)
"""The crates of :data:`ATCODER_CRATES` that Debian 12 (bookworm) packages, each as
:func:`debian_package` names it (``apt-cache policy``, checked when the docs were written)."""

DEFAULT_FEATURE_PACKAGES = ("librust-bstr+default-dev", "librust-num-integer+std-dev", "librust-num-iter+std-dev",
                            "librust-regex+default-dev")
"""The packages of these crates' default features: Debian ships each crate's optional
dependencies as ``+feature`` packages that its package only recommends (``apt-cache show``),
so an install without recommends (the judge image's) must name them, or cargo cannot resolve
``bstr`` (it needs ``regex-automata``)."""

_LIB_NAMES = {"ac-library-rs": "ac_library"}
"""Crates whose library is not named by their package name with '-' as '_'."""


def debian_package(crate: str) -> str:
    """Debian's package of a crate's sources: ``librust-<name, '_' as '-'>-dev``."""
    return f"librust-{crate.replace('_', '-')}-dev"


def lib_name(crate: str) -> str:
    """The name a solution writes in ``use`` for ``crate``."""
    return _LIB_NAMES.get(crate, crate.replace("-", "_"))


@dataclass(frozen=True)
class CrateSet:
    """The built crates: ``externs`` maps each library name to its file in ``deps``, which the
    compile sees at ``at`` (a mount point, or the folder's own path inside a judge image)."""

    deps: Path
    externs: dict[str, str]
    missing: tuple[str, ...]
    failed: tuple[str, ...]
    at: str = CRATES_AT

    def rustc_args(self) -> tuple[str, ...]:
        args = ["-L", f"dependency={self.at}"]
        for name, file in sorted(self.externs.items()):
            args += ["--extern", f"{name}={self.at}/{file}"]
        return tuple(args)


def image_crate_set(root: Path) -> CrateSet | None:
    """The crates a judge image built for its own rustc (None for an image built without them):
    each crate's file read from the cargo messages the image keeps beside them."""
    folder = root / IMAGE_CRATES.lstrip("/")
    messages = folder / "cargo-messages.json"
    if not messages.is_file():
        return None
    externs = _externs(messages.read_text(encoding="utf-8", errors="replace"), list(ATCODER_CRATES))
    missing = tuple(c for c in ATCODER_CRATES if lib_name(c) not in externs)
    return CrateSet(folder / "deps", externs, missing, (), at=f"{IMAGE_CRATES}/deps")


def crate_set(rustc: Path, cache: Path, registry: Path = DEBIAN_REGISTRY) -> CrateSet:
    """AtCoder's crates that ``registry`` holds, built by ``rustc`` (once: cached by content)."""
    have = available_versions(registry)
    offered = [c for c in ATCODER_CRATES if c.replace("_", "-") in have]
    missing = tuple(c for c in ATCODER_CRATES if c not in offered)
    key = _key(rustc, registry, have, offered)
    final = cache / "alebench" / "rust-crates" / key
    index = final / "crates.json"
    if index.is_file():
        return _read(final, index, missing)
    final.parent.mkdir(parents=True, exist_ok=True)
    logging.getLogger("cmx.step").info(
        "alebench: building %d crates of AtCoder's Rust set for %s, once (minutes; cached in %s)",
        len(offered), rustc, final)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".build-") as work:
        externs, failed = _build(Path(work), rustc, registry, offered)
        stage = Path(work) / "stage"
        shutil.copytree(Path(work) / "target" / "release" / "deps", stage / "deps")
        (stage / "crates.json").write_text(json.dumps({"externs": externs, "failed": failed}, indent=1),
                                           encoding="utf-8")
        try:
            os.replace(stage, final)
        except OSError:
            if not index.is_file():  # another judge won the race with the same content
                raise
    return _read(final, index, missing)


def _read(final: Path, index: Path, missing: tuple[str, ...]) -> CrateSet:
    doc = json.loads(index.read_text(encoding="utf-8"))
    return CrateSet(final / "deps", dict(doc["externs"]), missing, tuple(doc["failed"]))


def _key(rustc: Path, registry: Path, have: dict[str, list[str]], offered: list[str]) -> str:
    version = subprocess.run([str(rustc), "-vV"], capture_output=True, text=True, timeout=60, check=False).stdout
    digest = hashlib.sha256(f"{version}\0{registry}\0{sorted(have.items())}\0{offered}".encode())
    return digest.hexdigest()[:32]


def _build(work: Path, rustc: Path, registry: Path, offered: list[str]) -> tuple[dict[str, str], list[str]]:
    """Build ``offered``; a crate that does not build with this rustc is left out and named."""
    crates, failed = list(offered), list[str]()
    while True:
        done = _cargo(work, rustc, registry, crates)
        if done.returncode == 0:
            return _externs(done.stdout, crates), failed
        broken = _broken(done.stdout + done.stderr, crates)
        if not broken or len(failed) + len(broken) > MAX_DROPPED:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"building the Rust solution crates failed: {tail[:300]}")
        failed += broken
        crates = [c for c in crates if c not in broken]


def _cargo(work: Path, rustc: Path, registry: Path, crates: list[str]) -> subprocess.CompletedProcess[str]:
    project = work / "crates"
    (project / "src").mkdir(parents=True, exist_ok=True)
    (project / "src" / "lib.rs").write_text("", encoding="utf-8")
    deps = "".join(f'{c.replace("-", "_")} = {{ package = "{c}", version = "*" }}\n' for c in crates)
    (project / "Cargo.toml").write_text(
        f'[package]\nname = "cmx-solution-crates"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f"[dependencies]\n{deps}\n[profile.release]\nopt-level = 3\n", encoding="utf-8")
    home = work / "cargo-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        '[source.crates-io]\nreplace-with = "local"\n\n'
        f'[source.local]\ndirectory = "{registry}"\n\n[net]\noffline = true\n', encoding="utf-8")
    env = {**os.environ, "CARGO_HOME": str(home), "CARGO_TARGET_DIR": str(work / "target"), "RUSTC": str(rustc)}
    argv = [_cargo_beside(rustc), "build", "--release", "--offline", "--lib", "--message-format=json",
            "--manifest-path", str(project / "Cargo.toml")]
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"building the Rust solution crates took more than {BUILD_TIMEOUT_S:g} s") from None


def _cargo_beside(rustc: Path) -> str:
    """The cargo of the same toolchain as ``rustc`` where there is one, else Debian's or PATH's."""
    beside = rustc.parent / "cargo"
    if beside.is_file():
        return str(beside)
    return "/usr/bin/cargo" if Path("/usr/bin/cargo").is_file() else (shutil.which("cargo") or "cargo")


def _externs(stdout: str, crates: list[str]) -> dict[str, str]:
    """Library name -> rlib (or proc-macro .so) file name of each direct dependency, from cargo's messages."""
    wanted = {c.replace("-", "_"): c for c in crates}
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        target = message.get("target") or {}
        if message.get("reason") != "compiler-artifact" or not ({"lib", "rlib", "proc-macro"} & set(
                target.get("kind", []))):
            continue
        package = _package_name(str(message.get("package_id", "")))
        if package.replace("-", "_") not in wanted:
            continue
        files = [Path(f).name for f in message.get("filenames", []) if f.endswith((".rlib", ".so"))]
        if files:
            found[str(target["name"]).replace("-", "_")] = files[0]
    return found


def _package_name(package_id: str) -> str:
    """The package of a cargo package id, old (``name 1.0 (source)``) or new (``source#name@1.0``) form."""
    if "#" in package_id:
        tail = package_id.rsplit("#", 1)[1]
        return tail.split("@", 1)[0]
    return package_id.split(" ", 1)[0]


_COULD_NOT = re.compile(r"could not compile `([^`]+)`")


def _broken(output: str, crates: list[str]) -> list[str]:
    """The direct dependencies cargo could not compile (their own crates, or the ones that pull them in)."""
    named = set(_COULD_NOT.findall(output))
    return [c for c in crates if c in named or c.replace("-", "_") in named]


_UNRESOLVED = re.compile(r"(?:unresolved import `|can't find crate for `|failed to resolve: use of undeclared "
                         r"crate or module `|use of unresolved module or unlinked crate `)([A-Za-z0-9_]+)")


def explain_missing(message: str, crates: CrateSet | None) -> str:
    """The compile message, with a first line naming each crate of AtCoder's set it asked for
    that this judge does not offer (and why), so the error says what to do."""
    offered = set(crates.externs) if crates else set()
    atcoder = {lib_name(c): c for c in ATCODER_CRATES}
    asked = dict.fromkeys(m for m in _UNRESOLVED.findall(message) if m in atcoder and m not in offered)
    if not asked:
        return message
    why = ("Debian packages no such crate (librust-*-dev)" if crates is not None
           else "no crates are offered with this toolchain")
    names = ", ".join(atcoder[m] for m in asked)
    return (f"crate {names} of AtCoder's Rust set is not available on this judge ({why}); "
            f"see docs/alebench.md for the crates it offers\n{message}")
