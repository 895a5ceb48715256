"""The judge image's root filesystem as the sandbox judge's toolchain (``--judge_image=REF``).

The image (``containers/ale-bench-judge``, built by cmx-docker) is exported once per image
ID into ``<cache>/alebench/rootfs/<id>``: a stopped container is created from it and its
filesystem is streamed (``docker export``) into a staging folder beside the final one, then
renamed into place, under a file lock, so two judges never unpack it twice and nothing
half-written is ever used. Members are unpacked with tarfile's ``tar`` filter (leading ``/``
stripped, nothing outside the folder, whether by ``..`` or through a link unpacked before; no
setuid bits), hard links only to files inside, and device nodes and fifos are left out. The sandbox then runs every
compile, case and tester call with that root as its system root, read-only, under the
sandbox's own limits and cgroup measurements.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from cmx_alebench.runner import Call, CallLimits, Ending, Runner
from cmx_alebench.toolchain import Toolchain
from cmx_core.api.archives import FilterError, extract_all, tar_filter
from cmx_core.errors import StepFailed, UsageError

MARKER = ".cmx-rootfs.json"
"""Written last into a staged root: which image it is (a root without it is never used)."""
BUILD_HINT = ("build it with `cmx run recipe --tags=build,image,ale-bench-judge` on that engine "
              "and pass the tag it prints")
_SKIPPED = (tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE)


@dataclass(frozen=True)
class ImageRoot:
    """An exported image root: the reference asked for, the engine's image ID, the host folder."""

    ref: str
    image_id: str
    path: Path


def _client() -> Any:
    try:
        import docker  # deferred: the SDK is optional (cmx-alebench[docker]) and only this option needs it
    except ImportError:
        raise UsageError("--judge_image needs the docker SDK: pip install 'cmx-alebench[docker]'") from None
    where = os.environ.get("DOCKER_HOST", "the default socket")
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any engine failure is one usage line
        raise UsageError(f"--judge_image: no container engine answers at {where} ({exc}); start one, or drop "
                         "--judge_image to judge with the host's toolchain") from None
    return client


def image_id(client: Any, ref: str) -> str:
    """The engine's ID of ``ref``; a one-line UsageError saying how to build it when absent."""
    import docker.errors  # deferred: the SDK is optional, see _client

    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise UsageError(f"--judge_image {ref}: no such image on the engine at {where}; {BUILD_HINT}") from None
    except docker.errors.APIError as exc:
        raise UsageError(f"--judge_image {ref}: the engine refused it ({exc.explanation}); {BUILD_HINT}") from None


def export_root(ref: str, cache: Path) -> ImageRoot:
    """The root filesystem of image ``ref``, exported into the cache once per image ID."""
    client = _client()
    ident = image_id(client, ref)
    folder = cache / "alebench" / "rootfs"
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / ident.replace("sha256:", "")[:32]
    with FileLock(str(final) + ".lock"):
        if not (final / MARKER).is_file():
            _export(client, ident, final)
    return ImageRoot(ref, ident, final)


def _export(client: Any, ident: str, final: Path) -> None:
    stage = Path(tempfile.mkdtemp(dir=final.parent, prefix=".stage-"))
    container = client.containers.create(ident, command=["/bin/true"], network_disabled=True)
    try:
        unpack(_Chunks(container.export(chunk_size=1 << 20)), stage)
        (stage / MARKER).write_text(json.dumps({"image_id": ident}) + "\n", encoding="utf-8")
        stage.chmod(0o755)
        if final.exists():     # an unmarked leftover (an export killed before the rename) is replaced
            shutil.rmtree(final)
        os.rename(stage, final)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        container.remove(force=True)


def _member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``tar`` filter, hard links only to files inside, and no device nodes or fifos
    (the sandbox makes its own ``/dev``). Symbolic links may be absolute: they are resolved
    inside the sandbox, where the root is this folder."""
    if member.type in _SKIPPED:
        return None
    if member.islnk():
        target = os.path.realpath(os.path.join(dest, member.linkname))
        if os.path.commonpath([target, os.path.realpath(dest)]) != os.path.realpath(dest):
            raise FilterError(f"{member.name!r} would link to {target!r}, outside the destination")
    return tar_filter(member, dest)


def unpack(stream: io.RawIOBase, dest: Path) -> None:
    """Unpack a tar stream into ``dest``; a member that would land outside it is a StepFailed."""
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            extract_all(tar, dest, _member, numeric_owner=True)
    except (tarfile.TarError, KeyError) as exc:   # KeyError: a hard link to a member the stream lacks
        raise StepFailed(f"the judge image's filesystem was refused: {exc}") from None


class _Chunks(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the SDK's export stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = iter(chunks)
        self.rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.rest = chunk
        size = min(len(buffer), len(self.rest))
        buffer[:size] = self.rest[:size]
        self.rest = self.rest[size:]
        return size


class RunnerProbe:
    """Runs a toolchain probe (``g++ -dumpfullversion``) through the judge's runner, inside its
    root, in a scratch folder of its own (hashable by identity: the toolchain caches answers)."""

    def __init__(self, runner: Runner, scratch: Path) -> None:
        self.runner = runner
        self.scratch = scratch

    def __call__(self, argv: Sequence[str], stdin: str) -> tuple[int, str] | None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.scratch, prefix="probe-") as work:
            os.chmod(work, 0o755)
            ran = self.runner.run(Call(tuple(argv), Path(work), CallLimits(60.0, 60.0, 1 << 30, 1 << 20),
                                       stdin=stdin.encode()))
        if ran.ending is not Ending.EXITED or ran.exit_code is None:
            return None
        return ran.exit_code, ran.stdout.decode(errors="replace")


def image_toolchain(root: ImageRoot, runner: Runner, scratch: Path) -> Toolchain:
    """The toolchain of an exported image root, its programs run by ``runner`` (rooted there)."""
    return Toolchain(root=root.path, image=root.ref, image_id=root.image_id, probe=RunnerProbe(runner, scratch))
