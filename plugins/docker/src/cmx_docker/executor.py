"""The ``docker`` executor: build the plan's image if needed, run the plan inside it.

It is a :class:`cmx_core.api.RemoteExecutor`: the base ships the run's ``lock.json`` and has
the container run ``cmx run --lock … --allow-drift=remote --executor local --output <run
dir>/remote --json``, so the container cannot resolve a different graph; this module only
says how a container is submitted, waited for, fetched from and cancelled. The container
runs as a non-root user, with the run directory and a cmx cache bind-mounted at their host
paths (and every existing ``type: path`` input read-only, :mod:`cmx_docker.mounts`), no
network unless a step type needs it, GPU device requests when the plan needs an accelerator,
and the template's resource limits. The base folds the inner result back (with the facts
detected inside); the host engine records it, with the image record in ``system.container``
and a ``container.json`` artifact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.api import (
    Artifact,
    Capabilities,
    CmxError,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    Fetched,
    JobStatus,
    RemoteExecutor,
    RemoteJob,
    cache_dir,
)
from cmx_core.api import plan_plugins as used_by_plan
from cmx_docker import gpus, runopts, templates
from cmx_docker.build import ImageRecord, docker_cache, ensure_image
from cmx_docker.context import image_spec
from cmx_docker.digests import DigestMemo
from cmx_docker.engine import Endpoint, find_endpoint
from cmx_docker.firstrun import needed_base
from cmx_docker.job import ContainerJob, start_container
from cmx_docker.mounts import path_input_mounts
from cmx_docker.ownership import hand_back
from cmx_docker.reaper import reap
from cmx_docker.settings import DockerSettings
from cmx_docker.sources import checkout_root, plugin_sources

if TYPE_CHECKING:
    from cmx_core.api import Plan, Registry

DEFAULT_TEMPLATE = "python"
ENGINE_COMMIT_ENV = "CMX_ENGINE_GIT_COMMIT"  # set in job.env by RemoteExecutor.prepare
_LOG_TAIL = 10
_ACCELERATOR_TAGS = set(templates.CUDA_ARCH)


@dataclass(frozen=True)
class ContainerPlan:
    """Everything decided before the container starts (rendered, never run, in GPU tests)."""

    template: str
    accelerator: str | None
    options: runopts.RunOptions


@dataclass
class DockerHandle:
    """A started container and what it was started from."""

    job: ContainerJob
    image: ImageRecord
    planned: ContainerPlan


class DockerExecutor(RemoteExecutor[DockerHandle]):
    name = "docker"
    summary = "Build the recipe's image if needed and run the plan inside it"
    settings = DockerSettings
    capabilities = Capabilities(needs_docker=True)
    runs_on_this_host = True  # system (name, CPU, memory) is this host's; the container's limits are recorded beside

    def check_plan(self, context: ExecutionContext) -> None:
        """An unknown template, a bad option, or GPUs the engine cannot give are refused
        before anything runs."""
        plan, settings = context.plan, context.settings
        assert isinstance(settings, DockerSettings)
        name, accelerator = choose_template(plan, settings, context.registry)
        template = templates.load(name)
        values = runopts.merge(template.run, settings.run_overrides(), needs_gpu=accelerator is not None,
                               needs_network=False)
        runopts.container_user(settings.user)
        if values["gpus"] and not plan.facts_file:
            _check_gpu_route(str(values["gpus"]))

    def describe(self, context: ExecutionContext) -> dict[str, Any]:
        """The image tag (content-addressed: computed, nothing built), GPUs, mounts, network
        and limits the container would get, for ``cmx plan``."""
        plan, settings, registry = context.plan, context.settings, context.registry
        assert isinstance(settings, DockerSettings)
        name, accelerator = choose_template(plan, settings, registry)
        template = templates.load(name)
        values = runopts.merge(template.run, settings.run_overrides(), needs_gpu=accelerator is not None,
                               needs_network=plan_needs_network(plan, registry))
        try:
            tag = image_spec(name, None, DigestMemo(docker_cache() / "digests.json"), accelerator,
                             plugins=plan_plugins(plan, registry)).tag
        except CmxError as exc:
            tag = f"(cannot be computed here: {exc})"
        depends = _base_dependency(template)
        user = runopts.container_user(settings.user)
        mounts = ["<run dir> (read-write)", f"{_container_cache(user)} (read-write, the cmx cache)"]
        mounts += [f"{Path(d).resolve()} (read-only, recipes)" for d in plan.query.recipes_dirs]
        mounts += [f"{m.source} (read-only, a path input)"
                   for m in path_input_mounts(plan, (_container_cache(user), *map(Path, plan.query.recipes_dirs)))]
        return {"template": name, "image": tag, "accelerator": accelerator or "none",
                "gpus": values["gpus"] or "none", "network": "host" if values["network"] else "none",
                "user": user, "mounts": mounts, "memory": values["memory"] or "no limit",
                "cpus": values["cpus"] or "no limit", "pids": values["pids"] or "no limit",
                "shm_size": values["shm_size"] or "default",
                "timeout_s": values["timeout_s"] or "none",
                **({"depends_on": depends} if depends else {})}

    def job_env(self, request: ExecutionRequest) -> dict[str, str]:
        return {}  # the container's environment is container_plan's (it takes job.env's engine commit)

    def run(self, request: ExecutionRequest) -> ExecutionOutcome:
        """The base's run; afterwards, as root, the run directory goes back to the invoking user."""
        try:
            return super().run(request)
        finally:
            hand_back(Path(request.run_dir))

    def submit(self, job: RemoteJob) -> DockerHandle:
        context = job.request.context
        assert isinstance(context.settings, DockerSettings)
        template, accelerator = choose_template(context.plan, context.settings, context.registry)
        endpoint = find_endpoint()
        reap(endpoint)  # containers a killed cmx left behind
        image = ensure_image(template, accelerator, endpoint=endpoint,
                             plugins=plan_plugins(context.plan, context.registry), rebuild=context.settings.rebuild)
        planned = container_plan(job, image, context.settings, endpoint)
        return DockerHandle(start_container(planned.options, endpoint), image, planned)

    def wait(self, handle: DockerHandle) -> JobStatus:
        end = handle.job.wait()
        opts = handle.planned.options
        tail = " | ".join(line.strip() for line in end.logs.strip().splitlines()[-_LOG_TAIL:])
        if end.timed_out:
            return JobStatus("timeout", end.exit_code, f"container of {handle.image.tag} exceeded its time limit of "
                             f"{opts.timeout_s:g} s and was killed; raise timeout_s. Last lines: {tail}")
        if end.oom_killed:
            return JobStatus("oom", end.exit_code, f"container of {handle.image.tag} was OOM-killed (memory limit "
                             f"{opts.memory or 'none'}); raise the memory option. Last lines: {tail}")
        ended = f"container of {handle.image.tag} exited with code {end.exit_code}. Last lines: {tail}"
        if end.exit_code == 0:
            return JobStatus("completed", 0, ended)
        return JobStatus("failed", end.exit_code, ended)

    def fetch(self, handle: DockerHandle, job: RemoteJob) -> Fetched:
        """The run directory is bind-mounted: only the log and the image record to keep."""
        run_dir = job.request.run_dir
        log = run_dir / "container.log"
        log.write_text(handle.job.logs(), encoding="utf-8")
        record = run_dir / "container.json"
        record.write_text(json.dumps({"image": asdict(handle.image), "template": handle.planned.template,
                                      "accelerator": handle.planned.accelerator,
                                      "run": _run_summary(handle.planned.options)}, indent=2, default=str))
        return Fetched(logs=(log,), artifacts=(Artifact(record, "container"),),
                       system={"container": {**handle.image.container_fact(),
                                             "limits": handle.job.limits.as_fact() if handle.job.limits else None}})

    def cancel(self, handle: DockerHandle) -> None:
        handle.job.cancel()


def _base_dependency(template: templates.Template) -> str | None:
    """The debootstrap base build the run depends on (a fresh engine, no registry), for ``cmx
    plan``; None when the base is there or can be pulled, or when no engine answers here."""
    try:
        needed = needed_base(template, find_endpoint())
    except CmxError:
        return None  # planning on a machine without an engine: the run would say so
    return needed.describe() if needed else None


def _check_gpu_route(wanted: str) -> None:
    """Refuse GPUs the reachable engine cannot give (no NVIDIA runtime, no CDI spec). A plan
    made from a facts file describes another machine, and without a reachable engine the
    run fails at submit anyway (recorded): neither is checked here."""
    try:
        endpoint = find_endpoint()
    except CmxError:
        return
    gpus.route(endpoint, wanted)


def choose_template(plan: Plan, settings: DockerSettings, registry: Registry | None = None) -> tuple[str, str | None]:
    """(template name, accelerator tag or None) for the plan: the ``container`` option, else
    the recipe's ``container:``, else the template its needs call for (:func:`template_for_needs`)."""
    accelerator = plan_accelerator(plan)
    name = settings.container or plan.container
    if not name and registry is not None:
        name = template_for_needs(plan, registry, accelerator)
    return str(name or DEFAULT_TEMPLATE), accelerator


def template_for_needs(plan: Plan, registry: Registry, accelerator: str | None) -> str:
    """The template whose declared ``plugins:`` include a plugin the plan uses (with its
    extras: cpu-torch carries ``mlperf[llm]``, torch and transformers), among the GPU
    templates when the plan needs an accelerator and the CPU ones otherwise; the fewest
    plugins first, then by name. ``python`` (which installs whatever the plan uses, without
    extras) when none does."""
    used = used_by_plan(plan, registry) - {"cmx-core", "docker", "detect"}
    fits = []
    for name in templates.available():
        template = templates.load(name)
        serves = {p.partition("[")[0] for p in template.plugins}
        if used & serves and template.run.gpus == (accelerator is not None):
            fits.append((len(template.plugins), name))
    return min(fits)[1] if fits else DEFAULT_TEMPLATE


def plan_accelerator(plan: Plan) -> str | None:
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


def plan_plugins(plan: Plan, registry: Registry) -> tuple[str, ...]:
    """The plugins the image needs: those the plan uses (its recipes', step types' and
    facts' providers), and the host's detector plugins that the checkout holds (so facts
    inside match the host's)."""
    needed = used_by_plan(plan, registry) | set(detector_plugins(registry))
    needed &= set(plugin_sources(checkout_root()))
    needed -= {"cmx-core", "docker"}
    return tuple(sorted(needed))


def detector_plugins(registry: Registry) -> tuple[str, ...]:
    """The host's detector plugins that the checkout holds: every image gets them (so facts
    inside match the host's), and ``--tags=build,image`` builds with them (its step is handed
    the same names: :func:`checkout_plugins`), so a pre-built image is the one a run uses."""
    return checkout_plugins(d.plugin for d in registry.detectors.values())


def checkout_plugins(names: Iterable[str]) -> tuple[str, ...]:
    """Those of the plugins ``names`` that the checkout holds (cmx-core aside), sorted."""
    available = plugin_sources(checkout_root())
    return tuple(sorted({name for name in names if name in available} - {"cmx-core"}))


def plan_needs_network(plan: Plan, registry: Registry) -> bool:
    """True when any step type the plan uses declares ``needs_network``."""
    for node in plan.nodes:
        for step in node.steps:
            provider = registry.steps.get(step.uses)
            if provider is not None and provider.capabilities.needs_network:
                return True
    return False


def container_plan(job: RemoteJob, image: ImageRecord, settings: DockerSettings,
                   endpoint: Endpoint | None = None) -> ContainerPlan:
    """The container's command, user, mounts, environment and limits (GPUs routed for
    ``endpoint``: device requests on Docker, CDI devices on Podman)."""
    request, plan = job.request, job.request.context.plan
    template = templates.load(image.template)
    values = runopts.merge(template.run, settings.run_overrides(), needs_gpu=image.accelerator is not None,
                           needs_network=plan_needs_network(plan, request.context.registry))
    run_dir = Path(request.run_dir).resolve()
    user = runopts.container_user(settings.user)
    cache = _container_cache(user)
    mounts = [runopts.Mount(str(run_dir), str(run_dir)), runopts.Mount(str(cache), str(cache))]
    for directory in plan.query.recipes_dirs:
        mounts.append(runopts.Mount(str(Path(directory).resolve()), str(Path(directory).resolve()), True))
    mounts += path_input_mounts(plan, (run_dir, cache, *map(Path, plan.query.recipes_dirs)))
    env = {"CMX_CACHE_DIR": str(cache), "CMX_DATA_DIR": "/tmp/cmx-data", "HOME": "/tmp",
           "PYTHONUNBUFFERED": "1",
           # cmx-core's `container` detector reads these into the result's system.container
           "CMX_CONTAINER_IMAGE": image.tag, "CMX_CONTAINER_DIGEST": image.digest,
           "CMX_CONTAINER_RUNTIME": image.runtime}
    if ENGINE_COMMIT_ENV in job.env:  # the image's cmx is a wheel without .git
        env[ENGINE_COMMIT_ENV] = job.env[ENGINE_COMMIT_ENV]
    route = gpus.route(endpoint, str(values["gpus"])) if endpoint is not None and values["gpus"] else None
    opts = runopts.RunOptions(
        image=image.image_id, command=job.command, user=user, mounts=tuple(mounts), environment=env,
        labels={"org.cmx.run-dir": str(run_dir), "org.cmx.image": image.tag},
        # Podman's --init needs catatonit, which Debian's podman package lacks
        init=not image.runtime.startswith("podman"), cdi_devices=route.cdi_devices if route else (), **values)
    _prepare_dirs(run_dir, cache, user)
    return ContainerPlan(template=image.template, accelerator=image.accelerator, options=opts)


def _container_cache(user: str) -> Path:
    """The cmx cache the container uses: the host's own cache when the container runs as the
    host user; a dedicated persistent cache owned by the container user when the host user
    is root (the container never runs as root, and root's cache is not writable to it)."""
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


def _run_summary(options: runopts.RunOptions) -> dict[str, Any]:
    return {"user": options.user, "network": options.network, "gpus": options.gpus,
            "memory": options.memory, "cpus": options.cpus, "pids": options.pids, "shm_size": options.shm_size,
            "timeout_s": options.timeout_s, "command": list(options.command),
            "device_requests": options.device_requests(),
            "mounts": [asdict(m) for m in options.mounts]}
