"""The content-addressed description of an image: rendered Dockerfile + every context file.

:func:`image_spec` renders a template and digests everything that will be in its build
context, without building anything: the image tag is ``cmx-<template>:<digest[:24]>``, so
"is a rebuild needed?" is one image look-up. The wheels built from the checkout are
represented by the digest of their sources (hatchling builds them reproducibly) and the
wheelhouse by its pinned requirement lines, so neither has to exist to compute the tag.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from cmx_docker import aptpins, lockfile, templates
from cmx_docker.digests import DigestMemo, stat_fingerprint
from cmx_docker.engine import Endpoint, inspect_image
from cmx_docker.errors import ContextError, TemplateError
from cmx_docker.sources import LocalPackage, local_packages, pinned_closure

SPEC_VERSION = "cmx-docker-image-v1"
REQUIREMENTS = "requirements.lock"
WHEELS_DIR = "wheels"
CA_DEST = "certs/ca-bundle.crt"
IMAGE_USER = {"name": "cmx", "uid": 1000}


@dataclass(frozen=True)
class ImageSpec:
    """Everything that decides an image's content, and the tag derived from it."""

    template: templates.Template
    accelerator: str | None
    dockerfile: str
    requirements: str
    base_ref: str
    base_id: str | None
    base_digest: str | None
    files: tuple[tuple[str, Path], ...]
    packages: tuple[LocalPackage, ...]
    pinned: tuple[str, ...]
    digest: str
    variables: Mapping[str, Any] = field(default_factory=dict)
    floating: tuple[str, ...] = ()
    """Template packages fetched with their dependencies (none when the template has a lock)."""

    @property
    def tag(self) -> str:
        return f"cmx-{self.template.name}:{self.digest[:24]}"


def ca_bundle() -> Path | None:
    """The host's CA bundle (pip inside builds needs it behind TLS-intercepting proxies)."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


@dataclass(frozen=True)
class ResolvedBase:
    """The ``FROM`` image: its reference, image id and registry digest (when pulled)."""

    ref: str
    image_id: str | None
    repo_digest: str | None = None
    content_id: str | None = None
    """The rootfs digest of a debootstrap base (``org.cmx.rootfs-digest``): the same for every
    import of the same rootfs, so tags derive from it rather than from the import's id."""


def resolve_base(template: templates.Template, endpoint: Endpoint | None) -> ResolvedBase:
    """The local registry-free base when the engine has it, else the registry reference
    (its id is None until it has been pulled). Without an endpoint (rendering only) the
    local base is named, unresolved."""
    if endpoint is not None:
        for ref in (template.base.local, template.base.registry):
            doc = inspect_image(endpoint, ref) if ref else None
            if ref and doc is not None:
                digests = doc.get("RepoDigests") or []
                labels = (doc.get("Config") or {}).get("Labels") or {}
                return ResolvedBase(ref, str(doc["Id"]), str(digests[0]) if digests else None,
                                    labels.get("org.cmx.rootfs-digest"))
    return ResolvedBase(template.base.local or template.base.registry or "", None)


def image_spec(name: str, endpoint: Endpoint | None, memo: DigestMemo, accelerator: str | None = None,
               params: Mapping[str, Any] | None = None, plugins: tuple[str, ...] = ()) -> ImageSpec:
    """Render template ``name`` for ``accelerator`` and digest its whole build context;
    ``plugins`` are installed besides the template's own (e.g. the ones a plan uses)."""
    template = templates.load(name)
    base = resolve_base(template, endpoint)
    base_ref, base_id = base.ref, base.image_id
    files = _context_files(template)
    wanted = tuple(sorted(set(template.plugins) | set(plugins)))
    packages = tuple(local_packages(wanted, memo)) if template.install_cmx else ()
    variables = _variables(template, base_ref, base.content_id or base_id, accelerator, params or {},
                           ca=any(dest == CA_DEST for dest, _ in files))
    key = _render_key(template, packages, variables)
    rendered = memo.recall(key)
    if rendered is None:
        pins = _pins(template, packages)
        dockerfile = templates.render(template, variables)
        _check_copies(template, dockerfile, {dest for dest, _ in files})
        _check_apt(template, dockerfile)
        rendered = {"dockerfile": dockerfile, "pinned": pins}
        memo.remember(key, rendered)
    dockerfile, pinned = str(rendered["dockerfile"]), tuple(str(p) for p in rendered["pinned"])
    floating = () if template.lock else template.packages
    requirements = "".join(f"{line}\n" for line in (
        [f"{p.dist}=={p.version}" for p in packages] + list(pinned) + list(floating)))
    h = hashlib.sha256(f"{SPEC_VERSION}\n".encode())
    h.update(b"Dockerfile\0" + dockerfile.encode() + b"\0")
    h.update(f"{REQUIREMENTS}\0".encode() + requirements.encode() + b"\0")
    for dest, path in files:
        h.update(f"{dest}\0{memo.file(path)}\0".encode())
    for pkg in packages:
        h.update(f"wheel:{pkg.dist}=={pkg.version}\0{pkg.digest}\0".encode())
    return ImageSpec(template=template, accelerator=accelerator, dockerfile=dockerfile,
                     requirements=requirements, base_ref=base_ref, base_id=base_id,
                     base_digest=base.repo_digest,
                     files=files, packages=packages, pinned=pinned, digest=h.hexdigest(),
                     variables=variables, floating=floating)


def _pins(template: templates.Template, packages: tuple[LocalPackage, ...]) -> list[str]:
    """The image's pinned lines besides the cmx wheels: the template's full lock when it has
    one (checked to cover its packages and cmx's requirements), else the host's versions of
    cmx's dependencies minus what the template pins itself."""
    if template.lock is not None:
        pins = lockfile.read_pins(template.lock.file)
        lockfile.check_lock(template.lock.file, pins, template.packages,
                            lockfile.requirement_names(lockfile.cmx_lines(packages)))
        return [str(p) for p in pins]
    return _without(pinned_closure(list(packages)), template.packages) if packages else []


def _without(pins: list[str], overrides: tuple[str, ...]) -> list[str]:
    """Host pins minus the distributions a template pins itself (the template wins)."""
    own = {canonicalize_name(o.split("==")[0].split("[")[0]) for o in overrides}
    return [p for p in pins if canonicalize_name(p.split("==")[0]) not in own]


def _render_key(template: templates.Template, packages: tuple[LocalPackage, ...],
                variables: Mapping[str, Any]) -> str:
    """Key of a remembered rendering: the variables plus stat evidence that neither the
    template files nor the installed distributions (site-packages entries) changed."""
    watched = sorted(template.directory.iterdir()) + sorted(
        (template.directory.parent / templates.SHARED).glob("*"))
    watched += [Path(p) for p in sys.path if p.endswith("site-packages")]
    watched += [pkg.source / "pyproject.toml" for pkg in packages]
    material = json.dumps({"v": SPEC_VERSION, "vars": variables,
                           "packages": [(p.dist, p.version, p.extras) for p in packages],
                           "stat": stat_fingerprint(watched)}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def _variables(template: templates.Template, base_ref: str, base_id: str | None,
               accelerator: str | None, params: Mapping[str, Any], ca: bool) -> dict[str, Any]:
    unknown = set(params) - set(template.params)
    if unknown:
        raise TemplateError(f"{template.directory / templates.TEMPLATE_FILE}: unknown template "
                            f"param(s) {sorted(unknown)}; declared: {sorted(template.params)}")
    return {
        "template": template.name, "base": base_ref, "base_id": base_id or "unresolved",
        "python": template.python, "ca_bundle": CA_DEST if ca else "",
        "requirements": REQUIREMENTS, "wheels": WHEELS_DIR, "user": dict(IMAGE_USER),
        "accelerator": accelerator or "",
        "cuda_arch": templates.CUDA_ARCH.get(accelerator or "", ""),
        "gpu": bool(accelerator) or template.run.gpus,
        "params": {**template.params, **params},
        "apt": _apt(template, {**template.params, **params}),
    }


def _apt(template: templates.Template, params: Mapping[str, Any]) -> dict[str, Any]:
    """The pins and suites the shared apt step installs from (:mod:`cmx_docker.aptlock`)."""
    if template.apt is None:  # an apt-get install in the rendered Dockerfile is refused (_check_apt)
        return {"pins": [], "suites": "true"}
    aptpins.check_covers(template.apt, aptpins.requested(params.get("apt_packages")))
    return {"pins": [str(pin) for pin in template.apt.pins], "suites": aptpins.suites_sh(aptpins.DEBIAN_SUITE)}


def _context_files(template: templates.Template) -> tuple[tuple[str, Path], ...]:
    files: list[tuple[str, Path]] = []
    bundle = ca_bundle()
    if bundle is not None:
        files.append((CA_DEST, bundle))
    for rel in template.context:
        path = template.directory / rel
        if not path.is_file():
            raise ContextError(f"{template.directory / templates.TEMPLATE_FILE}: context file "
                               f"{rel!r} not found at {path}; create it or remove it from 'context'")
        files.append((rel, path))
    return tuple(files)


def _check_apt(template: templates.Template, dockerfile: str) -> None:
    """A Dockerfile that runs ``apt-get install`` needs the template's ``apt.lock``: floating apt
    content would change under an unchanged tag."""
    if template.apt is None and "apt-get install" in dockerfile:
        raise TemplateError(f"{template.directory / aptpins.APT_LOCK}: missing; the template's Dockerfile installs "
                            "apt packages, which must be pinned: record the lock with python -m cmx_docker.aptlock "
                            f"{template.name} (and install through _apt.j2)")


_COPY = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.IGNORECASE)


def _check_copies(template: templates.Template, dockerfile: str, present: set[str]) -> None:
    """Every COPY/ADD source of the rendered Dockerfile must be in the build context."""
    generated = {REQUIREMENTS, WHEELS_DIR, "."}  # "." is the whole context: only declared files (.dockerignore)
    for lineno, line in enumerate(dockerfile.splitlines(), 1):
        match = _COPY.match(line)
        if not match or "--from" in match.group(2):
            continue
        args = [a for a in match.group(2).split() if not a.startswith("--")]
        for src in args[:-1]:
            name = src.rstrip("/")
            if name in generated or name in present or any(p.startswith(name + "/") for p in present):
                continue
            raise ContextError(f"{template.dockerfile} (rendered line {lineno}): {match.group(1)} "
                               f"source {src!r} is not in the build context; add it to "
                               f"'context' in {templates.TEMPLATE_FILE}")
