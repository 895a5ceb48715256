"""A template's full lock: every distribution of the image pinned with ``==``, committed.

Without a lock, an image pins cmx's own dependencies to the host's versions and lets pip
pick the dependencies of the template's ``packages`` (vLLM's hundred or so float, and a host
pin such as numpy 2.4 can make the set unresolvable). A template with

    lock:
      file: requirements.lock        # generated, committed: NAME==VERSION, one per line
      constraints: constraints.txt   # optional caps the generator resolves under
      source_builds: [rouge-score]   # published only as sdists: built into wheels on the host

installs exactly the lock (plus the cmx wheels built from the checkout) and nothing else.
:func:`resolve` asks pip (``install --dry-run --report``, for the image's platform: Linux
x86_64, CPython ``python``, binary wheels) what a requirement set installs; the generator
(``python -m cmx_docker.lockgen TEMPLATE``) writes its answer, and the tests prove that the
committed lock resolves to itself: consistent and complete.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from cmx_docker.errors import TemplateError
from cmx_docker.sources import _pyproject_requires

PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")
"""The image's platform tags (Debian bookworm: glibc 2.36), as the wheelhouse fetches them."""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")


@dataclass(frozen=True)
class LockSpec:
    """A template's ``lock:`` section, with paths resolved against the template directory."""

    file: Path
    constraints: Path | None = None
    source_builds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pin:
    """One ``name==version`` line (``name`` canonicalised)."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_spec(meta: Path, data: Any) -> LockSpec | None:
    """The ``lock:`` value of ``meta`` (a template.yaml): None when absent."""
    if data is None:
        return None
    if isinstance(data, str):
        data = {"file": data}
    if not isinstance(data, Mapping) or not data.get("file"):
        raise TemplateError(f"{meta}: lock: give a mapping with 'file' (e.g. lock: {{file: requirements.lock}})")
    unknown = set(data) - {"file", "constraints", "source_builds"}
    if unknown:
        raise TemplateError(f"{meta}: lock: unknown key(s) {sorted(unknown)}; allowed: constraints, file, "
                            "source_builds")
    constraints = meta.parent / str(data["constraints"]) if data.get("constraints") else None
    return LockSpec(file=meta.parent / str(data["file"]), constraints=constraints,
                    source_builds=tuple(canonical(str(n)) for n in data.get("source_builds") or ()))


def read_pins(path: Path) -> tuple[Pin, ...]:
    """The pins of a lock file; anything but ``NAME==VERSION`` (or a comment) is an error
    naming the line, and so is a distribution pinned twice."""
    if not path.is_file():
        raise TemplateError(f"{path}: lock file missing; generate it with "
                            f"`python -m cmx_docker.lockgen {path.parent.name}`")
    pins: dict[str, Pin] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if not match:
            raise TemplateError(f"{path}:{lineno}: {line!r} is not NAME==VERSION; every line of a lock is pinned")
        pin = Pin(canonical(match.group(1)), match.group(2))
        if pin.name in pins:
            raise TemplateError(f"{path}:{lineno}: {pin.name} is pinned twice")
        pins[pin.name] = pin
    return tuple(sorted(pins.values(), key=lambda p: p.name))


def check_lock(path: Path, pins: Sequence[Pin], packages: Sequence[str], needed: Sequence[str]) -> None:
    """The lock holds each template package at its pinned version and every distribution the
    cmx packages require (their names: the lock's own consistency is pip's to prove)."""
    by_name = {p.name: p for p in pins}
    for line in packages:
        name, _, version = line.partition("==")
        have = by_name.get(canonical(name.split("[")[0]))
        if have is None or have.version != version:
            found = str(have) if have else "nothing"
            raise TemplateError(f"{path}: packages pins {line} but the lock has {found}; regenerate it with "
                                f"`python -m cmx_docker.lockgen {path.parent.name}`")
    missing = sorted({canonical(n) for n in needed} - set(by_name))
    if missing:
        raise TemplateError(f"{path}: the cmx packages need {', '.join(missing)}, which the lock lacks; "
                            f"regenerate it with `python -m cmx_docker.lockgen {path.parent.name}`")


def requirement_names(lines: Sequence[str]) -> list[str]:
    """Distribution names of requirement lines (``name[extra]>=1; marker`` -> ``name``)."""
    return [Requirement(line).name for line in lines]


def cmx_requirements(requires: Sequence[str], own: set[str], extras: Sequence[str] = ()) -> list[str]:
    """The requirement lines (markers applied for ``extras``) that are not cmx's own packages."""
    out = []
    for line in requires:
        req = Requirement(line)
        if canonical(req.name) in own:
            continue
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            continue
        req.marker = None
        out.append(str(req))
    return out


def cmx_lines(packages: Sequence[Any]) -> list[str]:
    """Requirement lines of the cmx ``packages`` (:class:`~cmx_docker.sources.LocalPackage`),
    from their pyprojects with their extras, without the packages themselves."""
    own = {canonical(p.dist) for p in packages}
    lines: list[str] = []
    for pkg in packages:
        lines += cmx_requirements(_pyproject_requires(pkg.source), own, pkg.extras)
    return list(dict.fromkeys(lines))


def build_source_wheels(pins: Sequence[Pin], names: Sequence[str], folder: Path) -> None:
    """Wheels of the pinned ``names`` (pure-Python sdists) built on this host into ``folder``."""
    wanted = [str(p) for p in pins if p.name in set(names)]
    if wanted:
        _pip([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), *wanted],
             f"building wheels of {', '.join(wanted)}")


def resolve(requirements: Sequence[str], python: str, constraints: Path | None = None,
            find_links: Sequence[Path] = (), timeout_s: float = 1200.0) -> tuple[Pin, ...]:
    """What ``pip install`` would install for ``requirements`` on the image's platform
    (``--dry-run --report``; nothing is installed or downloaded beyond metadata)."""
    with tempfile.TemporaryDirectory(prefix="cmx-lock-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
               "--report", str(report), "--target", str(Path(tmp) / "t"), "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", "--abi", f"cp{python.replace('.', '')}"]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        for folder in find_links:
            cmd += ["--find-links", str(folder)]
        if constraints is not None:
            cmd += ["-c", str(constraints)]
        requirements_file = Path(tmp) / "requirements.txt"
        requirements_file.write_text("".join(f"{line}\n" for line in requirements))
        _pip([*cmd, "-r", str(requirements_file)], "resolving the lock with pip --dry-run", timeout_s)
        return pins_of_report(json.loads(report.read_text()))


def pins_of_report(report: Mapping[str, Any]) -> tuple[Pin, ...]:
    """The ``install`` list of a pip installation report as pins."""
    pins = {canonical(str(item["metadata"]["name"])): str(item["metadata"]["version"])
            for item in report.get("install", [])}
    return tuple(Pin(name, version) for name, version in sorted(pins.items()))


def render(pins: Sequence[Pin], header: Sequence[str]) -> str:
    """The lock file's text: a comment header, then one pin per line, sorted."""
    return "".join(f"# {line}\n" for line in header) + "".join(f"{p}\n" for p in pins)


def _pip(cmd: list[str], what: str, timeout_s: float = 1200.0) -> None:
    print(f"cmx-docker: {what}", file=sys.stderr)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TemplateError(f"{what}: pip did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()
                 if line.strip() and not line.startswith("WARNING: Location")]
        errors = [line for line in lines if "ERROR" in line or "error:" in line]
        raise TemplateError(f"{what} failed (exit {proc.returncode}): {' | '.join((errors or lines)[-4:])}")
