"""Build an image from a template only when its content digest has no image yet.

:func:`ensure_image` computes the :class:`~cmx_docker.context.ImageSpec` (render + digest),
looks its tag up (one HTTP call, no SDK import) and returns at once on a hit. On a miss it
assembles the context (Dockerfile, lock file, CA bundle, wheels built from the checkout and
the pinned wheelhouse), builds through the ``docker`` SDK with progress on stderr, and
records the image id and digest under ``<cmx cache>/docker/images/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from cmx_core.api import cache_dir
from cmx_docker.context import REQUIREMENTS, WHEELS_DIR, ImageSpec, image_spec
from cmx_docker.digests import DigestMemo
from cmx_docker.engine import Endpoint, find_endpoint, inspect_image, sdk_client
from cmx_docker.errors import BuildFailed, ImageUnavailable
from cmx_docker.firstrun import build_base, needed_base
from cmx_docker.scan import scan_context
from cmx_docker.sources import build_wheel, wheelhouse

_LOG_TAIL = 8


@dataclass(frozen=True)
class ImageRecord:
    """An image that exists in the engine, and what it was built from."""

    tag: str
    image_id: str
    digest: str
    template: str
    accelerator: str | None
    base: str
    base_id: str | None
    base_digest: str | None
    runtime: str
    content_digest: str
    built: bool
    build_s: float

    def container_fact(self) -> dict[str, str]:
        """The result schema's ``system.container`` object (the executor adds the applied limits)."""
        return {"image": self.tag, "digest": self.digest, "runtime": self.runtime,
                "content_digest": self.content_digest}


def docker_cache() -> Path:
    return cache_dir() / "docker"


def ensure_image(template: str, accelerator: str | None = None,
                 params: Mapping[str, Any] | None = None, endpoint: Endpoint | None = None,
                 rebuild: bool = False, plugins: tuple[str, ...] = ()) -> ImageRecord:
    """The image for ``template`` (built unless an identical one exists; ``rebuild`` builds
    again without the engine's layer cache)."""
    endpoint = endpoint or find_endpoint()
    cache = docker_cache()
    memo = DigestMemo(cache / "digests.json")

    def respec() -> ImageSpec:
        return image_spec(template, endpoint, memo, accelerator, params, plugins)

    spec = respec()
    memo.save()
    doc = None if rebuild else verified(spec, endpoint, inspect_image(endpoint, spec.tag))
    if doc is not None:
        return _record(spec, endpoint, doc, built=False, build_s=0.0)

    (cache / "locks").mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / "locks" / f"{spec.tag.replace(':', '-')}.lock")):
        doc = None if rebuild else verified(spec, endpoint, inspect_image(endpoint, spec.tag))  # built meanwhile?
        if doc is not None:
            return _record(spec, endpoint, doc, built=False, build_s=0.0)
        return _build_and_record(spec, endpoint, cache, respec, rebuild)


CONTENT_LABEL = "org.cmx.content-digest"


def verified(spec: ImageSpec, endpoint: Endpoint, doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``doc`` when the image under ``spec.tag`` carries the content digest the tag was
    derived from; an image retagged (or built by hand) under that tag is refused."""
    if doc is None:
        return None
    label = ((doc.get("Config") or {}).get("Labels") or {}).get(CONTENT_LABEL)
    if label != spec.digest:
        raise ImageUnavailable(f"{endpoint.runtime}: image {spec.tag} ({str(doc.get('Id', '?'))[:19]}) has "
                               f"{CONTENT_LABEL}={label or 'none'}, not {spec.digest[:24]}...: it was retagged or "
                               f"built outside cmx, so it is not used; remove it (docker rmi {spec.tag}) and run "
                               "again to build the real one")
    return doc


def _build_and_record(spec: ImageSpec, endpoint: Endpoint, cache: Path,
                      respec: Callable[[], ImageSpec], rebuild: bool) -> ImageRecord:
    if spec.base_id is None:
        needed = needed_base(spec.template, endpoint)
        if needed is not None:  # a fresh machine without a registry: the debootstrap base first
            build_base(needed, endpoint, cache)
        else:
            _pull_base(spec, endpoint)
        spec = respec()  # the base now has an id, which the Dockerfile labels
        doc = None if rebuild else verified(spec, endpoint, inspect_image(endpoint, spec.tag))
        if doc is not None:  # the same base content as an image built before: reused
            return _record(spec, endpoint, doc, built=False, build_s=0.0)
    started = time.perf_counter()
    _build(spec, endpoint, cache, nocache=rebuild)
    doc = inspect_image(endpoint, spec.tag)
    if doc is None:
        raise BuildFailed(f"{endpoint.runtime}: build of {spec.tag} reported success but the "
                          "image is missing")
    record = _record(spec, endpoint, doc, built=True, build_s=time.perf_counter() - started)
    _save_record(cache, record)
    return record


def _record(spec: ImageSpec, endpoint: Endpoint, doc: Mapping[str, Any], built: bool,
            build_s: float) -> ImageRecord:
    repo_digests = doc.get("RepoDigests") or []
    image_id = str(doc["Id"])
    return ImageRecord(tag=spec.tag, image_id=image_id,
                       digest=str(repo_digests[0]).split("@")[-1] if repo_digests else image_id,
                       template=spec.template.name, accelerator=spec.accelerator,
                       base=spec.base_ref, base_id=spec.base_id, base_digest=spec.base_digest,
                       runtime=endpoint.runtime,
                       content_digest=spec.digest, built=built, build_s=round(build_s, 3))


def _save_record(cache: Path, record: ImageRecord) -> None:
    folder = cache / "images"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{record.tag.replace(':', '-')}.json"
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**asdict(record), "recorded_at": time.time()}, indent=2))
    os.replace(tmp, target)


def _pull_base(spec: ImageSpec, endpoint: Endpoint) -> None:
    """Pull the registry base; fail with a hint at the registry-free base when offline."""
    ref = spec.template.base.registry
    hint = ("build the registry-free base with `cmx run recipe --tags=debootstrap,base-image` "
            "(root and debootstrap needed)")
    if not ref:
        raise ImageUnavailable(f"base image {spec.template.base.local} is not in "
                               f"{endpoint.runtime}; {hint}")
    if spec.template.base.digest:
        name, _, tag = ref.rpartition(":")
        ref = f"{name if name and '/' not in tag else ref}@{spec.template.base.digest}"
    print(f"cmx-docker: pulling {ref}", file=sys.stderr)
    import docker.errors  # deferred: docker only when this runs (194 modules)
    import requests  # deferred: requests only when this runs (130 modules)

    client = sdk_client(endpoint)
    try:
        client.images.pull(ref)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImageUnavailable(f"cannot pull base image {ref} (offline or no registry: "
                               f"{first[:200]}); {hint}") from None
    finally:
        client.close()


def _build(spec: ImageSpec, endpoint: Endpoint, cache: Path, nocache: bool = False) -> None:
    (cache / "contexts").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache / "contexts", prefix="ctx-") as tmp:
        ctx = Path(tmp)
        _assemble(spec, ctx, cache)
        _stream_build(spec, endpoint, ctx, nocache)


def _assemble(spec: ImageSpec, ctx: Path, cache: Path) -> None:
    """The context: exactly the declared files (a ``.dockerignore`` admits only them), then
    the secret scan (:mod:`cmx_docker.scan`), which refuses the build naming the file."""
    (ctx / "Dockerfile").write_text(spec.dockerfile)
    (ctx / REQUIREMENTS).write_text(spec.requirements)
    for dest, path in spec.files:
        (ctx / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, ctx / dest)
    wheels = ctx / WHEELS_DIR
    wheels.mkdir()
    ours = [_link(build_wheel(pkg, cache), wheels) for pkg in spec.packages]
    theirs: list[Path] = []
    if spec.pinned or spec.floating:
        lock = spec.template.lock
        house = wheelhouse(list(spec.pinned), list(spec.floating), spec.template.python, cache,
                           source_builds=lock.source_builds if lock else ())
        theirs = [_link(wheel, wheels) for wheel in sorted(house.glob("*.whl"))]
    (ctx / DOCKERIGNORE).write_text(dockerignore([dest for dest, _ in spec.files]))
    scan_context(ctx, wheels=ours, skip=[w for w in theirs if w not in ours])


DOCKERIGNORE = ".dockerignore"


def dockerignore(files: list[str]) -> str:
    """An allow-list: everything is ignored but the Dockerfile, the lock, the wheels and the
    template's declared context files (so nothing else that lands in the folder is sent)."""
    allowed = ["Dockerfile", REQUIREMENTS, f"{WHEELS_DIR}/*.whl", *sorted(files)]
    return "# written by cmx-docker: only the declared files\n*\n" + "".join(f"!{name}\n" for name in allowed)


def _link(path: Path, folder: Path) -> Path:
    """``path`` hard-linked (else copied) into ``folder``; the path there."""
    target = folder / path.name
    if target.exists():  # the same wheel from two sources
        return target
    try:
        os.link(path, target)
    except OSError:
        shutil.copy2(path, target)
    return target


def _stream_build(spec: ImageSpec, endpoint: Endpoint, ctx: Path, nocache: bool) -> None:
    import docker.errors  # deferred: docker only when this runs (194 modules)
    import requests  # deferred: requests only when this runs (130 modules)

    client = sdk_client(endpoint)
    lines: list[str] = []
    print(f"cmx-docker: building {spec.tag} from template {spec.template.name}", file=sys.stderr)
    try:
        stream = client.api.build(
            path=str(ctx), tag=spec.tag, rm=True, forcerm=True, decode=True, pull=False,
            nocache=nocache,
            network_mode="host" if spec.template.build_network else "none",
            labels={CONTENT_LABEL: spec.digest})
        for chunk in stream:
            if "error" in chunk:
                _fail(spec, lines, str(chunk["error"]))
            text = str(chunk.get("stream") or chunk.get("status") or "").rstrip()
            if text:
                lines.extend(text.splitlines())
                print(f"  {text}", file=sys.stderr)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        _fail(spec, lines, str(exc))
    finally:
        client.close()


_APT_GONE = re.compile(r"Version '[^']+' for '[^']+' was not found")


def _fail(spec: ImageSpec, lines: list[str], error: str) -> None:
    steps = [line for line in lines if line.startswith("Step ")]
    at = f" at {steps[-1]}" if steps else ""
    tail = " | ".join(line.strip() for line in lines[-_LOG_TAIL:] if line.strip())
    gone = next((m.group(0) for line in lines if (m := _APT_GONE.search(line))), None)
    hint = (f"; the mirror no longer has a version {spec.template.directory / 'apt.lock'} pins ({gone}): "
            f"record the lock again with python -m cmx_docker.aptlock {spec.template.name}") if gone else ""
    raise BuildFailed(f"build of {spec.tag} (template {spec.template.name}) failed{at}: "
                      f"{error.strip().splitlines()[-1] if error.strip() else 'error'}{hint}; "
                      f"last build log lines: {tail or '(none)'}")
