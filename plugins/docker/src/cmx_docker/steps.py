"""Step types: ``docker.build`` (an image from a template) and ``docker.base`` (the
registry-free debootstrap base image)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmx_core.api import StepContext
from cmx_core.errors import UsageError

BUILD_PARAMS = {
    "template": "container template name (a directory of containers/), e.g. python, cuda-torch",
    "accelerator": "accelerator tag the image targets (h100, a100...); empty for none",
    "rebuild": "build even when an image with the same content digest exists",
}
BASE_PARAMS = {"suite": "Debian suite for debootstrap (default bookworm)"}


def build_step(ctx: StepContext) -> Mapping[str, Any]:
    """Outputs ``image`` (tag), ``image_id``, ``digest``, ``runtime`` and ``built``."""
    from cmx_docker.build import ensure_image  # deferred: start-up: pulls packaging (36 modules)
    from cmx_docker.executor import checkout_plugins  # deferred: start-up: pulls packaging, psutil (151 modules)

    template = str(ctx.params.get("template") or "")
    if not template:
        raise UsageError(f"{ctx.recipe}: docker.build needs 'template' (one of containers/*)")
    accelerator = str(ctx.params.get("accelerator") or "") or None
    # the plugins a run adds to every image (the host's detectors), so this is the image
    # `--container` uses for a plan whose plugins the template already carries
    record = ensure_image(template, accelerator, rebuild=_flag(ctx.params.get("rebuild")),
                          plugins=checkout_plugins(ctx.detector_plugins))
    ctx.log.info("image %s (%s)", record.tag, "built" if record.built else "cached")
    return {"image": record.tag, "image_id": record.image_id, "digest": record.digest,
            "runtime": record.runtime, "built": record.built}


def base_step(ctx: StepContext) -> Mapping[str, Any]:
    """Outputs ``image`` and ``image_id`` of the imported debootstrap base."""
    from cmx_docker.base import ensure_base  # deferred: start-up: 12 modules not needed to start cmx
    from cmx_docker.build import docker_cache  # deferred: start-up: pulls packaging (36 modules)
    from cmx_docker.engine import find_endpoint  # deferred: start-up: 8 modules not needed to start cmx
    from cmx_docker.firstrun import rootfs_cache  # deferred: start-up: pulls packaging (32 modules)

    suite = str(ctx.params.get("suite") or "bookworm")
    base = ensure_base(find_endpoint(), rootfs_cache(docker_cache()), suite=suite,
                       ref=f"cmx-base:{suite}-minbase")
    return {"image": base.ref, "image_id": base.image_id}


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true", "yes")
