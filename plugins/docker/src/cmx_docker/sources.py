"""What goes into an image's Python environment, all pinned and all from local files.

* cmx-core and the needed plugins: wheels built from the current checkout (never a branch
  tip), cached per source digest — the same sources always give the same image tag.
* their dependencies: pinned to the versions installed on this host (``name==version``), so
  the image runs exactly the stack the host resolved.
* a template's own ``packages`` (already ``==``-pinned in ``template.yaml``).

Wheels are fetched on the host with its own pip configuration into a wheelhouse keyed by the
requirement lines; the image installs them with ``pip --no-index``, so builds need no index,
no credentials and no network for Python packages.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cmx_core import api
from cmx_docker.digests import DigestMemo, tree_digest, tree_files
from cmx_docker.errors import ContextError

_CORE_INCLUDE = ("pyproject.toml", "README.md", "LICENSE", "cmx_core", "recipes")
_PLUGIN_INCLUDE = ("pyproject.toml", "README.md", "LICENSE", "src")


@dataclass(frozen=True)
class LocalPackage:
    """A distribution built from the checkout: name, version, source dir, source digest,
    and the extras whose requirements the image also needs."""

    dist: str
    version: str
    source: Path
    include: tuple[str, ...]
    digest: str
    extras: tuple[str, ...] = ()


def checkout_root() -> Path:
    """The cmx source checkout: ``CMX_SOURCE_DIR``, else where ``cmx_core`` is imported from."""
    explicit = os.environ.get("CMX_SOURCE_DIR")
    # cmx_core/api/__init__.py: the folder above the cmx_core package
    root = Path(explicit) if explicit else Path(api.__file__).resolve().parents[2]
    if api.project_name(root) != "cmx-core":
        raise ContextError(
            f"{root} is not a cmx source checkout (no pyproject.toml naming cmx-core); "
            "images install cmx from wheels built from a checkout: set CMX_SOURCE_DIR to one")
    return root


def local_packages(plugins: tuple[str, ...], memo: DigestMemo) -> list[LocalPackage]:
    """cmx-core plus each plugin (``name`` or ``name[extra,...]``, found by its ``cmx``
    entry-point name in the checkout), with their source digests."""
    root = checkout_root()
    found = [_package(root, _CORE_INCLUDE, memo)]
    sources = plugin_sources(root)
    wanted: dict[str, set[str]] = {}
    for entry in plugins:  # "mlperf" and "mlperf[llm]" are one package with the llm extra
        name, _, rest = entry.partition("[")
        wanted.setdefault(name.strip(), set()).update(e.strip() for e in rest.rstrip("]").split(",") if e.strip())
    for name, extra_set in sorted(wanted.items()):
        extras = tuple(sorted(extra_set))
        if name not in sources:
            raise ContextError(f"plugin {name!r} is not in the checkout {root} (plugins/*/pyproject.toml "
                               f"entry points: {', '.join(sorted(sources)) or 'none'}); images install "
                               "plugins from the checkout only")
        pkg = _package(sources[name], _PLUGIN_INCLUDE, memo)
        found.append(LocalPackage(pkg.dist, pkg.version, pkg.source, pkg.include, pkg.digest, extras))
    return found


_ENTRY_SECTION = re.compile(r"^\[project\.entry-points\.cmx\]\s*$(.*?)(?=^\[|\Z)", re.MULTILINE | re.DOTALL)
_ENTRY = re.compile(r'^\s*([A-Za-z0-9_.-]+)\s*=\s*"', re.MULTILINE)


def plugin_sources(root: Path) -> dict[str, Path]:
    """``cmx`` entry-point name -> package directory, for plugins/* and examples/* of the
    checkout (a plugin's name need not match its directory)."""
    found: dict[str, Path] = {}
    for pyproject in sorted([*root.glob("plugins/*/pyproject.toml"), *root.glob("examples/*/pyproject.toml")]):
        section = _ENTRY_SECTION.search(pyproject.read_text())
        for name in _ENTRY.findall(section.group(1)) if section else ():
            found.setdefault(name, pyproject.parent)
    return found


_FORCE_SECTION = re.compile(
    r"^\[tool\.hatch\.build(?:\.targets\.wheel)?\.(?:force-include|shared-scripts|shared-data)\]\s*$(.*?)(?=^\[|\Z)",
    re.MULTILINE | re.DOTALL)
_FORCE_KEY = re.compile(r'^\s*"([^"]+)"\s*=', re.MULTILINE)


def _force_included(text: str) -> list[str]:
    """Paths (relative to the package, maybe ``../``) its pyproject force-includes or ships
    as shared scripts or data (cmx-core's ``scripts/cmx``)."""
    return [key for section in _FORCE_SECTION.findall(text) for key in _FORCE_KEY.findall(section)]


def _package(source: Path, include: tuple[str, ...], memo: DigestMemo) -> LocalPackage:
    dist = api.project_name(source) or source.name
    text = (source / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    wanted = dict.fromkeys([*include, *_force_included(text)])
    present = tuple(i for i in wanted if (source / i).exists())
    return LocalPackage(dist=dist, version=match.group(1) if match else "0", source=source,
                        include=present, digest=tree_digest(source, present, memo))


def pinned_closure(packages: list[LocalPackage]) -> list[str]:
    """``name==version`` for every run-time dependency (transitively, with the requested
    extras) of ``packages``, pinned to this host's installed versions; the packages
    themselves are left out."""
    own = {canonicalize_name(p.dist) for p in packages}
    sources = {canonicalize_name(p.dist): p.source for p in packages}
    pins: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(p.dist, ("", *p.extras)) for p in packages]
    while todo:
        dist, extras = todo.pop()
        source = sources.get(canonicalize_name(dist))
        # a checkout package's requirements come from its pyproject: it need not be
        # installed on this host (e.g. cmx-detect in an image built next to cmx-core only)
        requires = _pyproject_requires(source) if source is not None else metadata.requires(dist)
        for line in requires or []:
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
                continue
            key = canonicalize_name(req.name)
            if key in own or key in pins:
                continue
            try:
                pins[key] = f"{req.name}=={metadata.version(req.name)}"
            except metadata.PackageNotFoundError:
                raise ContextError(f"{dist} requires {req.name}, which is not installed on this "
                                   f"host; install it (pip install '{req}') so its version "
                                   "can be pinned in the image") from None
            todo.append((req.name, ("", *req.extras)))
    return [pins[k] for k in sorted(pins)]


def _pyproject_requires(source: Path) -> list[str]:
    """``Requires-Dist``-style lines from a package's pyproject: its dependencies, and each
    optional dependency with an ``extra == "NAME"`` marker."""
    if sys.version_info >= (3, 11):
        import tomllib  # deferred: start-up: 4 modules not needed to start cmx
    else:  # Python 3.10: the same parser, from its backport (a dependency there)
        import tomli as tomllib  # deferred: tomli may be absent; only when this runs

    project = tomllib.loads((source / "pyproject.toml").read_text()).get("project", {})
    lines = list(project.get("dependencies", []))
    for extra, deps in (project.get("optional-dependencies") or {}).items():
        for dep in deps:
            requirement, _, marker = dep.partition(";")
            condition = f'({marker.strip()}) and extra == "{extra}"' if marker.strip() else f'extra == "{extra}"'
            lines.append(f"{requirement.strip()}; {condition}")
    return lines


def requirements_key(lines: list[str], python: str) -> str:
    """The wheelhouse key of a set of pinned requirement lines for a Python version."""
    return hashlib.sha256(("\n".join(sorted(lines)) + f"\npython={python}").encode()).hexdigest()


def build_wheel(pkg: LocalPackage, cache: Path) -> Path:
    """A wheel of ``pkg`` built from its source (cached per source digest)."""
    out = cache / "wheels" / f"{pkg.dist}-{pkg.digest[:16]}"
    done = sorted(out.glob("*.whl")) if out.is_dir() else []
    if done:
        return done[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = _isolated_copy(pkg, Path(tmp) / "tree")
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(Path(tmp) / "w"), str(src)]
        if _has_hatchling():
            cmd.insert(5, "--no-build-isolation")
        _pip(cmd, f"building the {pkg.dist} wheel from {pkg.source}")
        os.replace(Path(tmp) / "w", out)
    return min(out.glob("*.whl"))


def _isolated_copy(pkg: LocalPackage, tree: Path) -> Path:
    """Copy the package's declared files (those git tracks, see
    :func:`cmx_docker.digests.tree_files`: the same ones its digest covers) into ``tree`` at
    the same place relative to the checkout, including what its pyproject force-includes,
    also from outside its directory (the docker plugin ships ``../../containers``): the build
    never writes into the checkout, and an untracked file never reaches a wheel or an image."""
    root = checkout_root().resolve()
    src = tree / pkg.source.resolve().relative_to(root)
    src.mkdir(parents=True, exist_ok=True)
    for path in tree_files(pkg.source.resolve(), pkg.include):
        target = tree / path.relative_to(root)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return src


def _has_hatchling() -> bool:
    return importlib.util.find_spec("hatchling") is not None


def wheelhouse(pinned: list[str], packages: list[str], python: str, cache: Path,
               source_builds: tuple[str, ...] = ()) -> Path:
    """A directory holding wheels for ``pinned`` (no deps) and ``packages`` (with deps),
    fetched once with this host's pip configuration and reused; the pinned distributions
    named in ``source_builds`` (pure-Python sdists) are built into wheels here."""
    key = requirements_key(pinned + packages, python)
    out = cache / "wheelhouse" / key[:24]
    if (out / ".complete").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    if python == f"{sys.version_info.major}.{sys.version_info.minor}":
        # Same interpreter version as the image: `pip wheel` also builds the few packages
        # published only as sdists (the image installs with --no-index, so no sdist there).
        base = [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(out)]
    else:
        base = [sys.executable, "-m", "pip", "download", "-q", "-d", str(out), "--only-binary=:all:",
                "--python-version", python, "--platform", "manylinux2014_x86_64",
                "--platform", "manylinux_2_28_x86_64"]
    built = [p for p in pinned if _canonical(p.split("==")[0]) in set(source_builds)]
    if built:
        _pip([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(out), "--no-deps", *built],
             f"building wheels of {', '.join(built)}")
    pinned = [p for p in pinned if p not in built]
    if pinned:
        _pip([*base, "--no-deps", *pinned], "downloading the pinned dependencies")
    if packages:
        _pip(base + list(packages), f"downloading {', '.join(packages)}")
    (out / ".complete").write_text("\n".join(pinned + packages) + "\n")
    return out


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(cmd: list[str], what: str) -> None:
    print(f"cmx-docker: {what}", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        errors = [line for line in lines if re.search(r"Error|ERROR|error:", line)]
        tail = " | ".join((errors[:2] + lines[-2:]) if errors else lines[-4:])
        raise ContextError(f"{what} failed (exit {proc.returncode}): {tail}")
