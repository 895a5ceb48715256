"""A base image without any registry: ``debootstrap --variant=minbase`` from the Debian
mirror apt is configured with, then ``docker import``.

The mirror is read from apt's own configuration at run time (deb822 ``*.sources`` files or
the one-line ``sources.list``), so no mirror host is ever written into a file of ours.
The root filesystem tarball is kept in the cmx cache (or a directory you pass) so a second
import skips the ≈30 s debootstrap.

The base is named by its content, not by the import: :func:`rootfs_digest` hashes the
tarball's sorted entries (path, type, mode, owner, link target, content sha256; no mtimes),
the image carries it as ``org.cmx.rootfs-digest``, is tagged ``cmx-base:<suite>-<digest[:16]>``
beside the alias the templates name, and templates derive their tags from that digest rather
than from the import's image id (which changes with every import's timestamp). So two
imports of the same tarball, here or on another machine, give the same tags.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cmx_docker.engine import Endpoint, inspect_image, sdk_client
from cmx_docker.errors import ImageUnavailable

LOCAL_BASE = "cmx-base:bookworm-minbase"
ROOTFS_LABEL = "org.cmx.rootfs-digest"
_APT_DIR = Path("/etc/apt")


@dataclass(frozen=True)
class BaseImage:
    """The imported base: reference, image id, and how it was made."""

    ref: str
    image_id: str
    suite: str
    mirror: str
    tarball: Path | None
    rootfs_digest: str | None = None

    @property
    def content_tag(self) -> str | None:
        """``cmx-base:<suite>-<rootfs digest[:16]>``: the same for every import of the same rootfs."""
        return f"cmx-base:{self.suite}-{self.rootfs_digest.split(':')[-1][:16]}" if self.rootfs_digest else None


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
    # two builds at once (two cmx runs, or two test workers sharing a cache) wait for one
    # debootstrap instead of each running their own; the loser finds the tarball made
    with open(cache / f"{suite}-minbase.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.is_file():
            return tarball
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


def rootfs_digest(tarball: Path) -> str:
    """``sha256:`` over the tarball's entries sorted by path: path, type, mode, numeric owner,
    link target and content digest (mtimes and the archive's order left out), remembered
    beside the tarball by size and mtime."""
    st = tarball.stat()
    memo = tarball.with_name(tarball.name + ".digest.json")
    key = [st.st_size, st.st_mtime_ns]
    try:
        stored = json.loads(memo.read_text())
        if stored.get("key") == key:
            return str(stored["digest"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    entries = []
    with tarfile.open(tarball) as archive:
        for member in archive:
            content = ""
            if member.isfile():
                handle = archive.extractfile(member)
                content = hashlib.sha256(handle.read() if handle else b"").hexdigest()
            name = os.path.normpath(member.name.lstrip("/")) if member.name.strip("./") else "."
            entries.append(f"{name}\0{member.type.decode()}\0{member.mode:o}\0{member.uid}:{member.gid}\0"
                           f"{member.linkname}\0{content}\n")
    digest = "sha256:" + hashlib.sha256("".join(sorted(entries)).encode()).hexdigest()
    memo.write_text(json.dumps({"key": key, "digest": digest}))
    return digest


def ensure_base(endpoint: Endpoint, cache: Path, suite: str = "bookworm",
                ref: str = LOCAL_BASE, force: bool = False) -> BaseImage:
    """Import the debootstrap base as ``ref`` (and its content tag) unless the engine already
    has it with its rootfs digest; ``force`` imports again.

    Two imports at once (two cmx runs on a fresh engine, or two test workers) would each
    tag their own import, and the one that tagged first would go on with an image id the
    alias no longer names: the import holds a lock in ``cache`` and looks again once it has it."""
    found = None if force else _imported(endpoint, ref, suite)
    if found is not None:
        return found
    tarball = rootfs_tarball(suite, cache)
    with _held(tarball.parent / f"{suite}-minbase.import.lock"):
        found = None if force else _imported(endpoint, ref, suite)
        return found if found is not None else _import(endpoint, tarball, ref, suite)


@contextlib.contextmanager
def _held(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``; none where the cache is not ours to write (a read-only
    shared cache): the import then goes on as before, unserialized."""
    try:
        lock = open(path, "w")  # noqa: SIM115  (closed below, after the lock is released)
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _imported(endpoint: Endpoint, ref: str, suite: str) -> BaseImage | None:
    """The base the engine already has as ``ref``, when it carries its rootfs digest."""
    doc = inspect_image(endpoint, ref)
    label = _labels(doc).get(ROOTFS_LABEL) if doc else None
    if doc is None or not label:
        return None
    return BaseImage(ref=ref, image_id=doc["Id"], suite=suite, mirror="", tarball=None, rootfs_digest=label)


def _import(endpoint: Endpoint, tarball: Path, ref: str, suite: str) -> BaseImage:
    digest = rootfs_digest(tarball)
    base = BaseImage(ref=ref, image_id="", suite=suite, mirror="", tarball=tarball, rootfs_digest=digest)
    client = sdk_client(endpoint)
    try:
        output = str(client.api.import_image_from_file(str(tarball), changes=[f"LABEL {ROOTFS_LABEL}={digest}"]))
        ids = re.findall(r"sha256:[0-9a-f]{64}", output)
        if not ids:
            raise ImageUnavailable(f"importing {tarball} into {endpoint.runtime} gave no image id: {output[:200]}")
        for name in (ref, base.content_tag or ref):
            repository, tag = name.rsplit(":", 1)
            client.api.tag(ids[-1], repository, tag, force=True)
    finally:
        client.close()
    doc = inspect_image(endpoint, ref)
    if doc is None:
        raise ImageUnavailable(f"importing {tarball} as {ref} into {endpoint.runtime} failed")
    return BaseImage(ref=ref, image_id=doc["Id"], suite=suite, mirror=apt_mirror(), tarball=tarball,
                     rootfs_digest=digest)


def _labels(doc: dict[str, object] | None) -> dict[str, str]:
    config = (doc or {}).get("Config") or {}
    labels = config.get("Labels") if isinstance(config, dict) else None
    return dict(labels) if isinstance(labels, dict) else {}
