"""apt packages pinned from a recorded list: ``containers/<template>/apt.lock`` (the lock's
model; :mod:`cmx_docker.aptlock` records one).

A template that installs cmx installs its apt packages (``python3``, ``python3-venv`` and
``params.apt_packages``) from the base's suite plus its ``-updates`` and ``-security`` suites,
every package of the closure pinned as ``name=version`` from the template's ``apt.lock``. The
lock is recorded against the base image: ``python -m cmx_docker.aptlock TEMPLATE`` runs
``apt-get install --simulate`` of the requested packages in a container of the base (with
the network) and writes what apt would install, with the ``Date:`` of every package list it
read (by suite: no mirror host is written). The pins are part of the rendered Dockerfile,
so they are part of the image's content digest and tag: different apt content is a different
tag. The build itself compares what apt installed or changed with the pins and fails,
naming the difference, when they differ (a mirror that no longer has a pinned version fails
at ``apt-get install``), so a rebuild can never put other apt content under the same tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cmx_docker.errors import TemplateError

APT_LOCK = "apt.lock"
BASE_PACKAGES = ("python3", "python3-venv")  # what _shared/_python.j2 installs besides params.apt_packages
PIN_LINE = re.compile(r"^([a-z0-9][a-z0-9+.-]+)=([A-Za-z0-9][A-Za-z0-9.+~:-]*)$")

SUITES_SH = (
    "if [ -f /etc/apt/sources.list ] && ! grep -rqs -- '-security' /etc/apt/sources.list /etc/apt/sources.list.d; "
    "then m=$(sed -n 's/^deb \\([^ ]*\\) {suite} main.*/\\1/p' /etc/apt/sources.list | head -n 1); "
    "test -n \"$m\"; printf 'deb %s {suite}-updates main\\ndeb %s-security {suite}-security main\\n' "
    "\"$m\" \"${{m%/}}\" > /etc/apt/sources.list.d/cmx-suites.list; fi"
)
"""Shell (one line): add the ``-updates`` and ``-security`` suites beside a debootstrap base's
one ``deb MIRROR SUITE main`` line, on the same mirror (``.../debian`` -> ``.../debian-security``),
so no mirror host is written anywhere; a base with its own security suite is left alone."""

RECORD_SH = (
    "set -eu; {suites}; apt-get update -qq; "
    "for f in /var/lib/apt/lists/*Release; do s=${{f##*_dists_}}; printf '# list %s: %s\\n' \"${{s%_*Release}}\" "
    "\"$(sed -n 's/^Date: //p' \"$f\" | head -n 1)\"; done; "
    "apt-get install -s -qq --no-install-recommends \"$@\" "
    "| sed -n 's/^Inst \\([^ ]*\\) \\(\\[[^]]*\\] \\)\\{{0,1\\}}(\\([^ ]*\\) .*/\\1=\\3/p'"
)


@dataclass(frozen=True)
class AptPin:
    """One package of the closure at the version apt installs."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}={self.version}"


@dataclass(frozen=True)
class AptLock:
    """A template's recorded apt closure."""

    path: Path
    pins: tuple[AptPin, ...]

    def names(self) -> set[str]:
        return {pin.name for pin in self.pins}


def suites_sh(suite: str) -> str:
    return SUITES_SH.format(suite=suite)


def read_lock(path: Path) -> AptLock:
    """Parse ``path`` (``name=version`` lines, ``#`` comments); a TemplateError names the line."""
    pins: list[AptPin] = []
    seen: set[str] = set()
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN_LINE.match(line)
        if match is None:
            raise TemplateError(f"{path}:{lineno}: {line!r} is not a pin; write NAME=VERSION (record the lock "
                                f"again: python -m cmx_docker.aptlock {path.parent.name})")
        if match.group(1) in seen:
            raise TemplateError(f"{path}:{lineno}: {match.group(1)} is pinned twice; keep one line")
        seen.add(match.group(1))
        pins.append(AptPin(match.group(1), match.group(2)))
    if not pins:
        raise TemplateError(f"{path}: pins nothing; record it: python -m cmx_docker.aptlock {path.parent.name}")
    return AptLock(path, tuple(sorted(pins, key=lambda p: p.name)))


def requested(apt_packages: object) -> tuple[str, ...]:
    """The top-level packages a template installs: the shared ones and ``params.apt_packages``."""
    extra = [str(p) for p in apt_packages] if isinstance(apt_packages, (list, tuple)) else []
    return tuple(dict.fromkeys((*BASE_PACKAGES, *extra)))


def check_covers(lock: AptLock, wanted: tuple[str, ...]) -> None:
    """Every requested package must be pinned (else the lock was recorded for other packages)."""
    missing = [name for name in wanted if name not in lock.names()]
    if missing:
        raise TemplateError(f"{lock.path}: pins no version of {', '.join(missing)} (requested by the template); "
                            f"record the lock again: python -m cmx_docker.aptlock {lock.path.parent.name}")


DEBIAN_SUITE = "bookworm"
