"""``cmx cache prune --images``: remove cmx-built images that no cache entry references.

An image is cmx's when it carries ``org.cmx.content-digest`` (every template build does;
the debootstrap base does not and is kept). It is referenced when one of its tags or its id
is a string in a remaining cache entry's outputs (a ``docker.build`` step's ``image`` and
``image_id``). An image a container still uses is kept (the engine refuses), and said so.
"""

from __future__ import annotations

from cmx_docker.build import CONTENT_LABEL
from cmx_docker.engine import find_endpoint, sdk_client
from cmx_docker.errors import EngineUnavailable


def prune_images(referenced: frozenset[str], dry_run: bool) -> list[str]:
    """One line per image removed (or that would be); nothing when no engine answers."""
    import docker.errors  # deferred: docker only when this runs (194 modules)


    try:
        endpoint = find_endpoint()
    except EngineUnavailable:
        return []
    client = sdk_client(endpoint, timeout=120)
    lines: list[str] = []
    try:
        for image in client.images.list(filters={"label": CONTENT_LABEL}):
            names = {*image.tags, image.id}
            if names & referenced:
                continue
            label = ", ".join(sorted(image.tags)) or image.id[:19]
            if dry_run:
                lines.append(f"image {label}")
                continue
            try:
                client.images.remove(image.id, force=False)
                lines.append(f"image {label}")
            except docker.errors.APIError as exc:
                lines.append(f"image {label} kept: {' '.join(str(exc.explanation or exc).split())[:160]}")
    finally:
        client.close()
    return lines
