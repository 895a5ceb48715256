"""A base image without any registry: ``debootstrap --variant=minbase`` from the Debian
mirror apt is configured with, then ``docker import``.

The mirror is read from apt's own configuration at run time (deb822 ``*.sources`` files or
the one-line ``sources.list``), so no mirror host is ever written into a file of ours.
The root filesystem tarball is kept in the cmx cache (or a directory you pass) so a second
import skips the ≈30 s debootstrap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cmx_docker.engine import Endpoint, inspect_image, sdk_client
from cmx_docker.errors import ImageUnavailable

LOCAL_BASE = "cmx-base:bookworm-minbase"
_APT_DIR = Path("/etc/apt")


@dataclass(frozen=True)
class BaseImage:
    """The imported base: reference, image id, and how it was made."""

    ref: str
    image_id: str
    suite: str
    mirror: str
    tarball: Path | None


def apt_mirror(apt_dir: Path = _APT_DIR) -> str:
    """The first Debian mirror URI apt is configured with (not the security archive)."""
    uris: list[str] = []
    for sources in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for line in sources.read_text().splitlines():
            if line.strip().lower().startswith("uris:"):
                uris.extend(line.split(":", 1)[1].split())
    list_file = apt_dir / "sources.list"
    if list_file.is_file():
        for line in list_file.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "deb":
                uris.extend(p for p in parts[1:] if "://" in p)
    main = [u for u in uris if "security" not in u]
    if not main:
        raise ImageUnavailable(f"no Debian mirror found in {apt_dir}/sources.list(.d); "
                               "configure apt (a 'URIs:' line) before building the base image")
    return main[0]


def rootfs_tarball(suite: str, cache: Path) -> Path:
    """A ``debootstrap --variant=minbase`` rootfs as a tarball in ``cache`` (made once)."""
    tarball = cache / f"{suite}-minbase.tar"
    if tarball.is_file():
        return tarball
    if shutil.which("debootstrap") is None:
        raise ImageUnavailable("debootstrap is not installed: `apt-get install debootstrap` "
                               "(as root) to build the registry-free base image")
    if os.geteuid() != 0:
        raise ImageUnavailable("debootstrap needs root: build the base image as root, or "
                               f"import one yourself as {LOCAL_BASE}")
    cache.mkdir(parents=True, exist_ok=True)
    mirror = apt_mirror()
    with tempfile.TemporaryDirectory(dir=cache, prefix="rootfs-") as tmp:
        root = Path(tmp) / "root"
        _run(["debootstrap", "--variant=minbase", suite, str(root), mirror], "debootstrap")
        staged = Path(tmp) / "rootfs.tar"
        _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(staged), "."], "tar")
        os.replace(staged, tarball)
    return tarball


def _run(cmd: list[str], what: str) -> None:
    print(f"cmx-docker: {' '.join(cmd)}", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ImageUnavailable(f"{what} failed (exit {proc.returncode}): {tail}")


def ensure_base(endpoint: Endpoint, cache: Path, suite: str = "bookworm",
                ref: str = LOCAL_BASE) -> BaseImage:
    """Import the debootstrap base as ``ref`` unless the engine already has it."""
    doc = inspect_image(endpoint, ref)
    if doc is not None:
        return BaseImage(ref=ref, image_id=doc["Id"], suite=suite, mirror="", tarball=None)
    tarball = rootfs_tarball(suite, cache)
    repository, tag = ref.rsplit(":", 1)
    client = sdk_client(endpoint)
    try:
        output = str(client.api.import_image_from_file(str(tarball), repository=repository, tag=tag))
        ids = re.findall(r"sha256:[0-9a-f]{64}", output)
        if ids and inspect_image(endpoint, ref) is None:
            client.api.tag(ids[-1], repository, tag)  # Podman's compat import drops the tag
    finally:
        client.close()
    doc = inspect_image(endpoint, ref)
    if doc is None:
        raise ImageUnavailable(f"importing {tarball} as {ref} into {endpoint.runtime} failed")
    return BaseImage(ref=ref, image_id=doc["Id"], suite=suite, mirror=apt_mirror(),
                     tarball=tarball)
