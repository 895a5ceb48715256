"""Building a problem's Rust ``tools/`` crate offline, once, into the cmx cache.

The crate is built with cargo (Debian's ``/usr/bin/cargo`` where it is installed, else the
``cargo`` on PATH; ``CMX_ALEBENCH_CARGO`` overrides) with no network: crates.io is replaced
through cargo's source replacement by a local directory source, Debian's
``/usr/share/cargo/registry`` (the ``librust-*-dev`` packages) by default, or a vendored
directory (``cargo vendor`` output) the user gives. Before cargo runs, the crate's direct
dependencies are checked against that directory, and the missing ones are named in one line.

The build goes to ``<cache>/alebench/tools/<digest>/`` where ``digest`` is the sha256 of the
crate's content (``Cargo.toml``, ``Cargo.lock`` and ``src/``), staged and renamed, so a second
import of the same crate reuses it and an edited crate builds anew.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.errors import StepFailed, UsageError

if TYPE_CHECKING:
    import semantic_version

DEBIAN_REGISTRY = Path("/usr/share/cargo/registry")
BINARIES = ("gen", "tester", "vis")
BUILD_TIMEOUT_S = 900.0
_CRATE_DIR = re.compile(r"^(?P<name>.+?)-(?P<version>\d+\.\d+\.\d+.*)$")


@dataclass(frozen=True)
class Built:
    """The crate's binaries in the cache and whether this call built them."""

    bin_dir: Path
    digest: str
    built_now: bool
    registry: Path


def crate_digest(crate: Path) -> str:
    digest = hashlib.sha256()
    files = [crate / "Cargo.toml", crate / "Cargo.lock", *sorted((crate / "src").rglob("*"))]
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(crate).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def direct_dependencies(manifest: Path) -> list[str]:
    """The crate names of ``[dependencies]`` (a renamed one by its ``package``; path ones left out)."""
    return sorted(requirements(manifest))


def requirements(manifest: Path) -> dict[str, str | None]:
    """Each ``[dependencies]`` crate (by its ``package`` name; path ones left out) and its
    version requirement as written (None where it names none)."""
    try:
        text = manifest.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{manifest}: cannot read ({exc.strerror})") from None
    deps = _toml(text, manifest).get("dependencies", {})
    if not isinstance(deps, dict):
        raise UsageError(f"{manifest}: [dependencies] must be a table")
    found: dict[str, str | None] = {}
    for key, spec in deps.items():
        if isinstance(spec, dict) and "path" in spec:
            continue
        name = str(spec.get("package", key)) if isinstance(spec, dict) else key
        version = spec.get("version") if isinstance(spec, dict) else spec
        found[name] = str(version) if isinstance(version, str) else None
    return found


def _toml(text: str, where: Path) -> dict[str, Any]:
    try:
        # deferred: start-up: 8 modules not needed to start cmx
        import tomllib  # type: ignore[import-not-found, unused-ignore]  # 3.11+
    except ImportError:  # Python 3.10: the [dependencies] table read line by line
        return {"dependencies": _dependencies_by_line(text)}
    try:
        parsed: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not valid TOML ({exc})") from None
    return parsed


def _dependencies_by_line(text: str) -> dict[str, Any]:
    deps: dict[str, Any] = {}
    inside = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            inside = line == "[dependencies]"
            continue
        if inside and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            package = re.search(r'package\s*=\s*"([^"]+)"', value)
            version = re.search(r'version\s*=\s*"([^"]+)"', value)
            if re.search(r"\bpath\s*=", value):
                deps[key.strip('"')] = {"path": ""}
            elif value.startswith("{"):
                deps[key.strip('"')] = {**({"package": package.group(1)} if package else {}),
                                        **({"version": version.group(1)} if version else {})}
            else:
                deps[key.strip('"')] = value.strip('"\'')
    return deps


def available_versions(registry: Path) -> dict[str, list[str]]:
    """Crate name ('-' for '_', as cargo takes them) -> the versions a directory source holds
    (``<name>-<version>/`` folders with a ``Cargo.toml``)."""
    if not registry.is_dir():
        return {}
    found: dict[str, list[str]] = {}
    for entry in sorted(registry.iterdir()):
        match = _CRATE_DIR.match(entry.name)
        if match and (entry / "Cargo.toml").is_file():
            found.setdefault(match.group("name").replace("_", "-"), []).append(match.group("version"))
    return found


def available_crates(registry: Path) -> set[str]:
    """Crate names in a directory source (``<name>-<version>/`` folders)."""
    return set(available_versions(registry))


def missing_crates(manifest: Path, registry: Path) -> list[str]:
    """The crate's direct dependencies that ``registry`` lacks ('-' and '_' alike, as cargo takes them)."""
    have = available_crates(registry)
    return [name for name in direct_dependencies(manifest) if name.replace("_", "-") not in have]


def unmet_pins(manifest: Path, registry: Path) -> list[str]:
    """The direct dependencies ``registry`` holds, but at no version their requirement accepts,
    each as ``name <requirement> (has <versions>)``: cargo would stop at them one at a time."""
    have = available_versions(registry)
    unmet = []
    for name, requirement in sorted(requirements(manifest).items()):
        versions = have.get(name.replace("_", "-"))
        if not versions or requirement is None:
            continue
        spec = cargo_requirement(requirement, manifest, name)
        if not any(spec.match(v) for v in _parsed(versions)):
            unmet.append(f"{name} {requirement} (has {', '.join(versions)})")
    return unmet


def cargo_requirement(requirement: str, manifest: Path, name: str) -> semantic_version.SimpleSpec:
    """Cargo's reading of a version requirement: a bare version is a caret one, ``=x`` is exact."""
    import semantic_version  # deferred: start-up: read only when a tools crate is imported

    parts = []
    for raw in requirement.split(","):
        part = raw.strip()
        if part in ("*", ""):
            part = ">=0.0.0"
        elif part.startswith("=") and not part.startswith("=="):
            part = "=" + part
        elif part[:1].isdigit():
            part = "^" + part
        parts.append(part)
    try:
        return semantic_version.SimpleSpec(",".join(parts))
    except ValueError:
        raise UsageError(f"{manifest}: [dependencies] {name} = {requirement!r} is not a version requirement "
                         "cargo reads") from None


def _parsed(versions: list[str]) -> list[semantic_version.Version]:
    import semantic_version  # deferred: start-up: read only when a tools crate is imported

    parsed = []
    for version in versions:
        try:
            parsed.append(semantic_version.Version(version))
        except ValueError:
            continue
    return parsed


def find_cargo() -> str:
    chosen = os.environ.get("CMX_ALEBENCH_CARGO") or ("/usr/bin/cargo" if Path("/usr/bin/cargo").is_file()
                                                       else shutil.which("cargo"))
    if not chosen:
        raise UsageError("no cargo to build the Rust tools with; install Debian's (apt-get install cargo rustc "
                         "librust-rand-dev librust-rand-chacha-dev) or set CMX_ALEBENCH_CARGO")
    return chosen


def build_tools(crate: Path, cache: Path, vendor: Path | None = None) -> Built:
    """The binaries of ``crate`` (a ``tools/`` folder with ``Cargo.toml``), built once."""
    manifest = crate / "Cargo.toml"
    registry = (vendor or DEBIAN_REGISTRY).resolve()
    if vendor is not None and not vendor.is_dir():
        raise UsageError(f"--vendor {vendor}: not a directory; give the output folder of 'cargo vendor'")
    digest = crate_digest(crate)
    final = cache / "alebench" / "tools" / digest
    if all((final / name).is_file() for name in ("gen", "tester")):
        return Built(final, digest, False, registry)
    _check_sources(manifest, registry, vendor)
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".build-") as work:
        _cargo_build(crate, Path(work), registry, keep_lock=vendor is not None)
        stage = Path(work) / "stage"
        stage.mkdir()
        release = Path(work) / "target" / "release"
        for name in BINARIES:
            if (release / name).is_file():
                shutil.copy2(release / name, stage / name)
        if not all((stage / name).is_file() for name in ("gen", "tester")):
            raise UsageError(f"{manifest}: the crate has no gen and tester binaries (src/bin/gen.rs, tester.rs)")
        try:
            os.replace(stage, final)
        except OSError:
            if not (final / "tester").is_file():     # another import won the race with the same content
                raise
    return Built(final, digest, True, registry)


def _check_sources(manifest: Path, registry: Path, vendor: Path | None) -> None:
    """One line naming every crate ``registry`` lacks and every version pin it cannot meet."""
    missing = missing_crates(manifest, registry)
    pins = unmet_pins(manifest, registry)
    if not missing and not pins:
        return
    found = ([f"crates not in {registry}: {', '.join(missing)}"] if missing else []) + (
        [f"version pins {registry} cannot meet: {'; '.join(pins)}"] if pins else [])
    hint = ("vendor them (cargo vendor, on a machine with network) and pass --vendor DIR"
            + ("; or install the missing crates' librust-*-dev packages" if missing and not pins else "")
            if vendor is None else "vendor them into that folder (cargo vendor)")
    raise UsageError(f"{manifest}: {'; '.join(found)}; {hint}")


def _cargo_build(crate: Path, work: Path, registry: Path, keep_lock: bool) -> None:
    source = work / "crate"
    shutil.copytree(crate, source, ignore=shutil.ignore_patterns("target"))
    if not keep_lock:
        (source / "Cargo.lock").unlink(missing_ok=True)   # its versions are crates.io's, not the registry's
    home = work / "cargo-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[source.crates-io]\nreplace-with = "local"\n\n'
        f'[source.local]\ndirectory = "{registry}"\n\n[net]\noffline = true\n', encoding="utf-8")
    cargo = find_cargo()
    env = {**os.environ, "CARGO_HOME": str(home), "CARGO_TARGET_DIR": str(work / "target")}
    beside = Path(cargo).parent / "rustc"
    if beside.is_file() and "RUSTC" not in os.environ:
        env["RUSTC"] = str(beside)                   # Debian's cargo with Debian's rustc
    argv = [cargo, "build", "--release", "--offline", "--bins", "--manifest-path", str(source / "Cargo.toml")]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{crate}: cargo build did not finish within {BUILD_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        errors = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("error")]
        first = errors[0] if errors else (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UsageError(f"{crate / 'Cargo.toml'}: cargo build failed: {first[:300]}")
