"""The ``docker`` executor: build the plan's image if needed, run the plan inside it.

Inside, the same query runs with the local executor (``cmx run recipe --tags=…
--executor local --output <run dir>/container --json``) as a non-root user, with the run
directory and a cmx cache bind-mounted at their host paths, no network unless needed, GPU
device requests when the plan needs an accelerator, and the template's resource limits.
The result written inside is copied to ``<run dir>/result.json`` with the image facts in
``system.container`` (and a ``container.json`` artifact with the whole image record); the
engine indexes that file in the host's store.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cmx_core.api import ExecutionRequest
from cmx_docker import runopts, templates
from cmx_docker.build import ImageRecord, docker_cache, ensure_image
from cmx_docker.container import InnerRun, run_container
from cmx_docker.engine import find_endpoint
from cmx_docker.errors import ContainerFailed

DEFAULT_TEMPLATE = "python"
INNER_DIR = "container"
ENGINE_KEYS = frozenset({"facts", "run_id", "session", "lock_digest"})
_LOG_TAIL = 10
_ACCELERATOR_TAGS = set(templates.CUDA_ARCH)


@dataclass(frozen=True)
class ContainerPlan:
    """Everything decided before the container starts (rendered, never run, in GPU tests)."""

    template: str
    accelerator: str | None
    options: runopts.RunOptions


def run(request: ExecutionRequest) -> Path:
    """Executor entry point (see :class:`cmx_core.api.Executor`)."""
    template, accelerator = choose_template(request)
    options = dict(request.options)
    user_options = _user_options(options)
    # Bad options fail before anything is built.
    runopts.merge(templates.load(template).run, user_options, needs_gpu=False, needs_network=False)
    endpoint = find_endpoint()
    registry = getattr(options.get("session"), "registry", None)
    image = ensure_image(template, accelerator, endpoint=endpoint, plugins=plan_plugins(request.plan, registry),
                         rebuild=runopts.as_bool(options.get("rebuild", False), "rebuild"))
    planned = container_plan(request, image, user_options)
    inner = run_container(planned.options, endpoint)
    return _host_result(request, image, planned, inner)


def _user_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The executor options a user passed (without the keys the engine adds itself)."""
    return {k: v for k, v in options.items() if k not in ENGINE_KEYS}


def choose_template(request: ExecutionRequest) -> tuple[str, str | None]:
    """(template name, accelerator tag or None) for the plan."""
    plan = request.plan
    name = request.options.get("container") or request.options.get("template")
    name = str(name or getattr(plan, "container", None) or DEFAULT_TEMPLATE)
    return name, plan_accelerator(plan)


def plan_accelerator(plan: Any) -> str | None:
    """The accelerator the plan requires (``requires: {accelerator: h100}`` on any node, or
    a selected variation named like an accelerator tag)."""
    for node in plan.nodes:
        wanted = (node.requires or {}).get("accelerator")
        if isinstance(wanted, (list, tuple)) and wanted:
            wanted = wanted[0]
        if wanted:
            return str(wanted)
    for value in _variation_names(plan.root.variations):
        if value in _ACCELERATOR_TAGS:
            return value
    return None


def _variation_names(variations: Mapping[str, Any]) -> list[str]:
    names = []
    for key, value in variations.items():
        names.append(str(value) if isinstance(value, str) else str(key))
    return names


def plan_plugins(plan: Any, registry: Any = None) -> tuple[str, ...]:
    """The plugins the image needs: those providing the plan's recipes and step types, and
    the host's detector plugins that the checkout holds (so facts inside match the host's)."""
    from cmx_docker.sources import checkout_root, plugin_sources

    needed: set[str] = set()
    steps = getattr(registry, "steps", None) or {}
    for node in plan.nodes:
        source = str(getattr(node.recipe, "source", ""))
        if source.startswith("plugin:"):
            needed.add(source.split(":", 1)[1])
        for step in getattr(node, "steps", ()):
            provider = steps.get(getattr(step, "uses", ""))
            if provider is not None and provider.plugin:
                needed.add(provider.plugin)
    available = plugin_sources(checkout_root())
    for detector in (getattr(registry, "detectors", None) or {}).values():
        if detector.plugin in available:
            needed.add(detector.plugin)
    needed -= {"cmx-core", "docker"}
    return tuple(sorted(needed))


def plan_needs_network(plan: Any, registry: Any = None) -> bool:
    """True when any step type the plan uses declares ``needs_network``."""
    steps = getattr(registry, "steps", None) or {}
    for node in plan.nodes:
        for step in getattr(node, "steps", ()):
            provider = steps.get(getattr(step, "uses", ""))
            if provider is not None and provider.capabilities.needs_network:
                return True
    return False


def container_plan(request: ExecutionRequest, image: ImageRecord,
                   options: Mapping[str, Any]) -> ContainerPlan:
    """The container's command, user, mounts, environment and limits."""
    template = templates.load(image.template)
    session = request.options.get("session")
    values = runopts.merge(template.run, options, needs_gpu=image.accelerator is not None,
                           needs_network=plan_needs_network(request.plan, getattr(session, "registry", None)))
    run_dir = Path(request.run_dir).resolve()
    user = runopts.container_user(options.get("user"))
    cache = _container_cache(user)
    mounts = [runopts.Mount(str(run_dir), str(run_dir)), runopts.Mount(str(cache), str(cache))]
    for directory in getattr(request.plan.query, "recipes_dirs", ()):
        mounts.append(runopts.Mount(str(Path(directory).resolve()), str(Path(directory).resolve()), True))
    env = {"CMX_CACHE_DIR": str(cache), "CMX_DATA_DIR": "/tmp/cmx-data", "HOME": "/tmp",
           "PYTHONUNBUFFERED": "1",
           # cmx-core's `container` detector reads these into the result's system.container
           "CMX_CONTAINER_IMAGE": image.tag, "CMX_CONTAINER_DIGEST": image.digest,
           "CMX_CONTAINER_RUNTIME": image.runtime}
    opts = runopts.RunOptions(
        image=image.image_id, command=tuple(inner_command(request, run_dir / INNER_DIR)),
        user=user, mounts=tuple(mounts), environment=env,
        labels={"org.cmx.run-dir": str(run_dir), "org.cmx.image": image.tag},
        # Podman's --init needs catatonit, which Debian's podman package lacks
        init=not image.runtime.startswith("podman"), **values)
    _prepare_dirs(run_dir, cache, user)
    return ContainerPlan(template=image.template, accelerator=image.accelerator, options=opts)


def inner_command(request: ExecutionRequest, output: Path) -> list[str]:
    """The ``cmx run`` command line the container runs (argument list, never a shell)."""
    query = request.plan.query
    cmd = ["cmx", "run", "recipe", f"--tags={','.join(query.tags)}", "--executor", "local",
           "--output", str(output), "--json"]
    for directory in getattr(query, "recipes_dirs", ()):
        cmd += ["--recipes", str(Path(directory).resolve())]
    for key, value in dict(query.inputs).items():
        cmd.append(f"--input.{key}={value}")
    if request.jobs > 1:
        cmd += ["-j", str(request.jobs)]
    if not request.use_cache:
        cmd.append("--no-cache")
    if request.refresh:
        cmd.append("--refresh")
    return cmd


def _container_cache(user: str) -> Path:
    """The cmx cache the container uses: the host's own cache when the container runs as the
    host user; a dedicated persistent cache owned by the container user when the host user
    is root (the container never runs as root, and root's cache is not writable to it)."""
    from cmx_core.paths import cache_dir

    if os.getuid() != 0:
        return cache_dir()
    return docker_cache() / f"container-cache-{user.replace(':', '-')}"


def _prepare_dirs(run_dir: Path, cache: Path, user: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    if os.getuid() == 0:
        uid, gid = (int(x) for x in user.split(":"))
        for path in (run_dir, cache):
            os.chown(path, uid, gid)


def _host_result(request: ExecutionRequest, image: ImageRecord, planned: ContainerPlan,
                 inner: InnerRun) -> Path:
    opts = planned.options
    run_dir = Path(request.run_dir)
    tail = " | ".join(line.strip() for line in inner.logs.strip().splitlines()[-_LOG_TAIL:])
    if inner.timed_out:
        raise ContainerFailed(f"container of {image.tag} exceeded its time limit of "
                              f"{opts.timeout_s:g} s and was killed; raise timeout_s. Last lines: {tail}")
    if inner.oom_killed:
        raise ContainerFailed(f"container of {image.tag} was OOM-killed (memory limit "
                              f"{opts.memory or 'none'}); raise the memory option. Last lines: {tail}")
    inner_result = run_dir / INNER_DIR / "result.json"
    (run_dir / "container.log").write_text(inner.logs)
    if not inner_result.is_file():
        raise ContainerFailed(f"container of {image.tag} exited with code {inner.exit_code} "
                              f"without writing {inner_result}. Last lines: {tail}")
    print(f"cmx-docker: container finished (exit {inner.exit_code}); image {image.tag} "
          f"{image.image_id[:19]}", file=sys.stderr)
    return write_host_result(run_dir, inner_result, image, planned, request.options)


def write_host_result(run_dir: Path, inner_result: Path, image: ImageRecord,
                      planned: ContainerPlan, engine_options: Mapping[str, Any]) -> Path:
    """``<run dir>/result.json``: the inner document under the host run's id and lock,
    its artifacts rebased onto the run directory, ``system.container`` filled and the image
    record attached as an artifact."""
    document = json.loads(inner_result.read_text())
    if engine_options.get("run_id"):
        document["run_id"] = str(engine_options["run_id"])
    provenance = document.get("provenance")
    if isinstance(provenance, dict) and engine_options.get("lock_digest"):
        provenance["lock_digest"] = str(engine_options["lock_digest"])
    record = run_dir / "container.json"
    record.write_text(json.dumps({"image": asdict(image), "template": planned.template,
                                  "accelerator": planned.accelerator,
                                  "run": _run_summary(planned.options)}, indent=2, default=str))
    artifacts = []
    for artifact in document.get("artifacts") or []:
        path = str(artifact.get("path", ""))
        if path and not path.startswith("/"):
            artifact = {**artifact, "path": f"{INNER_DIR}/{path}"}
        artifacts.append(artifact)
    data = record.read_bytes()
    artifacts.append({"path": "container.json", "sha256": hashlib.sha256(data).hexdigest(),
                      "size_bytes": len(data), "kind": "container"})
    document["artifacts"] = artifacts
    system = document.get("system")
    if isinstance(system, dict):
        system["container"] = image.container_fact()
    else:
        document["system"] = {"container": image.container_fact()}
    target = run_dir / "result.json"
    tmp = target.with_name(f".result.json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True))
    os.replace(tmp, target)
    return target


def _run_summary(options: runopts.RunOptions) -> dict[str, Any]:
    return {"user": options.user, "network": options.network, "gpus": options.gpus,
            "memory": options.memory, "cpus": options.cpus, "shm_size": options.shm_size,
            "timeout_s": options.timeout_s, "command": list(options.command),
            "device_requests": options.device_requests(),
            "mounts": [asdict(m) for m in options.mounts]}
