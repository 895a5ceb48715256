"""A first ``--container`` run on a machine without a registry (#35 item 5).

A template's ``FROM`` is its local debootstrap base when the engine has it, else its registry
image. On a fresh machine with neither, and no registry answering for the registry image, the
debootstrap base (what ``cmx run recipe --tags=debootstrap,base-image`` makes) is a dependency
of the run: ``cmx plan`` shows it under the executor (``depends_on``) and the image build
imports it first, from the cached rootfs tarball when there is one, instead of failing.

Whether a registry answers is the engine's own answer to a distribution inspect (the manifest
of the registry image, nothing pulled), so the registry is whatever the engine is set up with.
"""

from __future__ import annotations

import http.client
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from cmx_docker import templates
from cmx_docker.base import BaseImage, ensure_base
from cmx_docker.engine import Endpoint, api_get, inspect_image
from cmx_docker.errors import ImageUnavailable

BASE_RECIPE_TAGS = "debootstrap,base-image"
"""The tags of the recipe that builds the base by hand (recipes/build-base-image.yaml)."""
ROOTFS_CACHE_ENV = "CMX_DOCKER_ROOTFS_CACHE"
"""A directory for the debootstrap rootfs tarball (default: the docker cache's ``base/``)."""
REGISTRY_TIMEOUT_S = 20.0
"""How long the engine may take to say whether its registry has the image."""
DEBOOTSTRAP_REF = re.compile(r"^cmx-base:([a-z]+)-minbase$")
"""The local bases cmx can make itself: ``cmx-base:<Debian suite>-minbase``."""


@dataclass(frozen=True)
class BaseBuild:
    """The base a run has to build first: the local reference, its Debian suite and why."""

    image: str
    suite: str
    reason: str

    def describe(self) -> str:
        """The plan's line: what is built, by which recipe's step, and why."""
        return (f"{BASE_RECIPE_TAGS} (build-base-image: debootstrap --variant=minbase, imported as "
                f"{self.image}), built before the image: {self.reason}")


def rootfs_cache(docker_cache: Path) -> Path:
    """Where the rootfs tarball is kept: ``$CMX_DOCKER_ROOTFS_CACHE``, else ``docker_cache/base``."""
    configured = os.environ.get(ROOTFS_CACHE_ENV)
    return Path(configured) if configured else docker_cache / "base"


def suite_of(ref: str) -> str | None:
    """``cmx-base:bookworm-minbase`` -> ``bookworm``; None for a base cmx does not make."""
    found = DEBOOTSTRAP_REF.match(ref)
    return found.group(1) if found else None


def registry_answers(endpoint: Endpoint, ref: str) -> bool:
    """Whether the engine's registry knows ``ref`` (a distribution inspect: nothing is pulled)."""
    try:
        status, _ = api_get(endpoint.url, f"/distribution/{quote(ref, safe=':@/')}/json",
                            timeout=REGISTRY_TIMEOUT_S)
    except (OSError, http.client.HTTPException):
        return False
    return status == 200


def needed_base(template: templates.Template, endpoint: Endpoint) -> BaseBuild | None:
    """The base build a run of ``template`` depends on, or None: the engine has the local
    or the registry base, the template names no local base, or a registry answers."""
    local, registry = template.base.local, template.base.registry
    suite = suite_of(local) if local else None
    if not local or suite is None or any(inspect_image(endpoint, ref) is not None for ref in (local, registry) if ref):
        return None
    if registry and registry_answers(endpoint, registry):
        return None
    why = f"no registry answers for {registry}" if registry else "the template names no registry image"
    return BaseBuild(local, suite, f"{local} is not in {endpoint.runtime} and {why}")


def build_base(needed: BaseBuild, endpoint: Endpoint, docker_cache: Path) -> BaseImage:
    """Import the debootstrap base now (debootstrap runs only when no rootfs tarball is cached)."""
    print(f"cmx-docker: {needed.reason}: building the debootstrap base {needed.image} first",
          file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        base = ensure_base(endpoint, rootfs_cache(docker_cache), suite=needed.suite, ref=needed.image)
    except ImageUnavailable as exc:
        raise ImageUnavailable(f"{needed.reason}, and building the debootstrap base failed: {exc} (it needs root "
                               f"and debootstrap; by hand: cmx run recipe --tags={BASE_RECIPE_TAGS})") from None
    print(f"cmx-docker: base {base.ref} ({base.image_id[:19]}) ready in {time.perf_counter() - started:.1f} s",
          file=sys.stderr, flush=True)
    return base
