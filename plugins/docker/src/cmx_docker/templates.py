"""Container templates: ``containers/<name>/{template.yaml,Dockerfile.j2}``.

``template.yaml`` declares the base image (a local, registry-free one and a registry
reference), the pinned Python packages, extra context files, the cmx plugins to install and
the default run options; ``Dockerfile.j2`` is rendered by a sandboxed Jinja2 environment
with strict undefined, so a typo in a template is an error, never an empty string.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_docker.aptpins import APT_LOCK, AptLock, read_lock
from cmx_docker.errors import TemplateError
from cmx_docker.lockfile import LockSpec, parse_spec

TEMPLATE_FILE = "template.yaml"
DOCKERFILE = "Dockerfile.j2"
SHARED = "_shared"  # snippets templates {% include %}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")
_KEYS = {"summary", "base", "python", "packages", "plugins", "context", "build_network",
         "run", "params", "install_cmx", "lock"}
_RUN_KEYS = {"gpus", "network", "memory", "cpus", "pids", "shm_size", "timeout_s"}

# Canonical accelerator tag -> CUDA compute capability the image's kernels target.
CUDA_ARCH = {"h100": "9.0", "h200": "9.0", "gh200": "9.0", "b200": "10.0", "a100": "8.0",
             "a10": "8.6", "l4": "8.9", "l40s": "8.9", "v100": "7.0", "t4": "7.5"}


@dataclass(frozen=True)
class BaseRef:
    """Where a template's ``FROM`` comes from: ``local`` (the debootstrap base, no registry)
    is preferred when present; ``registry`` is pulled otherwise; ``digest`` pins it."""

    local: str | None
    registry: str | None
    digest: str | None = None


@dataclass(frozen=True)
class RunDefaults:
    """Default ``docker run`` options a template declares (a recipe names the template)."""

    gpus: bool = False
    network: bool = False
    memory: str | None = None
    cpus: float | None = None
    pids: int | None = None
    shm_size: str | None = "256m"
    timeout_s: float | None = None


@dataclass(frozen=True)
class Template:
    """A loaded template (its Dockerfile not yet rendered)."""

    name: str
    directory: Path
    summary: str
    base: BaseRef
    python: str
    packages: tuple[str, ...]
    plugins: tuple[str, ...]
    context: tuple[str, ...]
    build_network: bool
    run: RunDefaults
    install_cmx: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)
    lock: LockSpec | None = None
    """The committed full lock (see :mod:`cmx_docker.lockfile`): the image installs exactly it."""
    apt: AptLock | None = None
    """The recorded apt closure (``apt.lock``, :mod:`cmx_docker.aptlock`): every apt package pinned."""

    @property
    def dockerfile(self) -> Path:
        return self.directory / DOCKERFILE


def template_dirs() -> list[Path]:
    """Directories searched for templates, first match wins: ``CMX_CONTAINERS_PATH``
    (os.pathsep-separated), the copy packaged in the wheel, the checkout's ``containers/``."""
    dirs = [Path(p) for p in os.environ.get("CMX_CONTAINERS_PATH", "").split(os.pathsep) if p]
    here = Path(__file__).resolve().parent
    dirs.append(here / "containers")
    if len(here.parents) > 3:
        dirs.append(here.parents[3] / "containers")
    return [d for d in dirs if d.is_dir()]


def available() -> list[str]:
    """Names of all templates found, sorted."""
    names = {p.parent.name for d in template_dirs() for p in d.glob(f"*/{TEMPLATE_FILE}")}
    return sorted(names)


def load(name: str) -> Template:
    """Load the template called ``name`` (a :class:`TemplateError` names the candidates)."""
    if not _NAME.match(name):
        raise TemplateError(f"container template name {name!r} is invalid: use [a-z0-9._-]")
    for directory in template_dirs():
        meta = directory / name / TEMPLATE_FILE
        if meta.is_file():
            return _parse(name, meta)
    known = ", ".join(available()) or "none"
    raise TemplateError(
        f"container template {name!r} not found in {[str(d) for d in template_dirs()]}; "
        f"known templates: {known}")


def _parse(name: str, meta: Path) -> Template:
    import yaml  # deferred: yaml only when this runs (20 modules)

    try:
        data = yaml.safe_load(meta.read_text()) or {}
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", -1) + 1
        raise TemplateError(f"{meta}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise TemplateError(f"{meta}: must hold a mapping")
    unknown = set(data) - _KEYS
    if unknown:
        raise TemplateError(f"{meta}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    if not (meta.parent / DOCKERFILE).is_file():
        raise TemplateError(f"{meta.parent / DOCKERFILE}: missing; every template needs one")
    packages = tuple(str(p) for p in data.get("packages") or ())
    for pkg in packages:
        if not _PINNED.match(pkg):
            raise TemplateError(f"{meta}: packages: {pkg!r} is not pinned; write NAME==VERSION")
    return Template(
        name=name, directory=meta.parent, summary=str(data.get("summary", "")),
        base=_base(meta, data.get("base") or {}), python=str(data.get("python", "3.11")),
        packages=packages, plugins=tuple(str(p) for p in data.get("plugins") or ()),
        context=tuple(str(p) for p in data.get("context") or ()),
        build_network=bool(data.get("build_network", True)),
        run=_run_defaults(meta, data.get("run") or {}), params=dict(data.get("params") or {}),
        install_cmx=bool(data.get("install_cmx", True)), lock=parse_spec(meta, data.get("lock")),
        apt=read_lock(meta.parent / APT_LOCK) if (meta.parent / APT_LOCK).is_file() else None)


def _base(meta: Path, data: Mapping[str, Any]) -> BaseRef:
    if not isinstance(data, Mapping) or not (data.get("local") or data.get("registry")):
        raise TemplateError(f"{meta}: base: give 'local' and/or 'registry' image references")
    return BaseRef(local=data.get("local"), registry=data.get("registry"),
                   digest=data.get("digest"))


def _run_defaults(meta: Path, data: Mapping[str, Any]) -> RunDefaults:
    unknown = set(data) - _RUN_KEYS
    if unknown:
        raise TemplateError(f"{meta}: run: unknown key(s) {sorted(unknown)}; allowed: {sorted(_RUN_KEYS)}")
    return RunDefaults(**{k: data[k] for k in data})


def render(template: Template, variables: Mapping[str, Any]) -> str:
    """Render the template's Dockerfile with ``variables`` (sandboxed, strict undefined)."""
    import jinja2  # deferred: jinja2 only when this runs (24 modules)
    from jinja2.sandbox import SandboxedEnvironment  # deferred: jinja2 only when this runs (25 modules)

    loader = jinja2.FileSystemLoader([str(template.directory),
                                      str(template.directory.parent / SHARED)])
    env = SandboxedEnvironment(loader=loader, undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True, autoescape=False,
                               trim_blocks=True, lstrip_blocks=True)
    path = template.dockerfile
    try:
        return env.get_template(DOCKERFILE).render(**variables)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from None
    except jinja2.TemplateError as exc:
        line = _template_line(exc, path)
        where = f"{path}:{line}" if line else str(path)
        raise TemplateError(f"{where}: failed to render: {exc}; "
                            f"available variables: {sorted(variables)}") from None


def _template_line(exc: BaseException, path: Path) -> int:
    """The template line an exception was raised at (Jinja2 rewrites tracebacks)."""
    tb = exc.__traceback__
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
