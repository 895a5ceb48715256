"""``cmx plugins install ./path``: a plugin's source directory, installed by pip.

A name is a path when it starts with ``.``, ``/`` or ``~``, or names an existing directory.
Before pip runs, the directory's ``pyproject.toml`` is read so that what would fail with a
build backend's traceback is refused with one line instead:

* when every ``[build-system] requires`` of the project is importable here, pip builds it
  with ``--no-build-isolation``, so nothing is fetched (``PIP_NO_INDEX=1`` works);
* when one is missing and the index is off, the error names it;
* hatchling builds an editable install through the ``editables`` package unless
  ``[tool.hatch.build.targets.wheel] dev-mode-dirs`` is set (then it writes a plain ``.pth``);
  an editable install that would need the missing ``editables`` is refused with the fix.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.plugins.registry_yaml import _toml

_EXTRAS = re.compile(r"^(?P<path>.+?)(?P<extras>\[[A-Za-z0-9_.,\- ]*\])?$")
_MODULE_OF = {"setuptools": "setuptools", "hatchling": "hatchling", "flit-core": "flit_core",
              "flit_core": "flit_core", "poetry-core": "poetry.core", "pdm-backend": "pdm.backend",
              "wheel": "wheel", "editables": "editables"}


@dataclass(frozen=True)
class BuildSystem:
    """The ``[build-system]`` table of a project and whether it can build here offline."""

    backend: str
    requires: tuple[str, ...]
    missing: tuple[str, ...]
    """The requirements whose module cannot be imported in this environment."""
    hatch_dev_mode_dirs: bool
    """Whether hatchling's editable build writes a plain ``.pth`` (``dev-mode-dirs`` set)."""


@dataclass(frozen=True)
class LocalSource:
    """One ``PATH[extra,...]`` of the command line."""

    path: Path
    extras: str
    build: BuildSystem

    def requirement(self, editable: bool) -> list[str]:
        target = f"{self.path}{self.extras}"
        return ["--editable", target] if editable else [target]


def is_local_path(text: str) -> bool:
    """Whether ``text`` of ``cmx plugins install`` names a directory rather than a plugin."""
    if text.startswith((".", "/", "~")):
        return True
    match = _EXTRAS.match(text)
    return match is not None and Path(match["path"]).is_dir()


def read_local_source(text: str) -> LocalSource:
    """The source directory ``text`` (with extras) and its build system; a UsageError naming
    the path when it is not a Python project."""
    match = _EXTRAS.match(text)
    raw = match["path"] if match else text
    path = Path(raw).expanduser().resolve()
    pyproject = path / "pyproject.toml"
    if not path.is_dir():
        raise UsageError(f"{raw}: no such directory; give a plugin's source directory (the one holding "
                         "pyproject.toml), a registry name or a distribution")
    if not pyproject.is_file():
        raise UsageError(f"{raw}: no pyproject.toml there; give a plugin's source directory, e.g. one made "
                         "by `cmx plugins new NAME`")
    return LocalSource(path, (match["extras"] or "") if match else "", read_build_system(pyproject))


def project_name(directory: Path) -> str | None:
    """The ``name`` of the ``[project]`` table of ``directory``'s ``pyproject.toml``, or None
    (no such file, no such key). Read line by line, so Python 3.10 (no tomllib) reads it
    too: a plugin's or cmx-core's own file, whose name is a plain ``name = "..."`` line."""
    pyproject = directory / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    table = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped.strip("[] ")
        elif table == "project" and stripped.startswith("name") and "=" in stripped:
            key, _, value = stripped.partition("=")
            if key.strip() == "name":
                return value.split("#", 1)[0].strip().strip("\"'") or None
    return None


def read_build_system(pyproject: Path) -> BuildSystem:
    try:
        parsed = _toml(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{pyproject}: cannot read it ({exc})") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise UsageError(f"{pyproject}: not valid TOML ({exc}); fix the file") from None
    if parsed is None:  # Python 3.10 has no tomllib: pip checks the build system itself
        return BuildSystem("", (), (), True)
    table = parsed.get("build-system") or {}
    # PEP 517's defaults when [build-system] is absent
    requires = tuple(str(r) for r in table.get("requires", ["setuptools>=40.8.0"]))
    backend = str(table.get("build-backend", "setuptools.build_meta:__legacy__"))
    wheel = parsed.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    missing = tuple(r for r in requires if not _importable(pyproject, r))
    return BuildSystem(backend, requires, missing, bool(wheel.get("dev-mode-dirs")))


def _importable(pyproject: Path, requirement: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement  # deferred: only an install needs it

    try:
        name = Requirement(requirement).name
    except InvalidRequirement:
        raise UsageError(f"{pyproject}: [build-system] requires '{requirement}' is not a requirement") from None
    module = _MODULE_OF.get(name.lower(), name.lower().replace("-", "_"))
    return module_available(module)


def module_available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def build_options(source: LocalSource, *, editable: bool, index_off: bool) -> list[str]:
    """pip's build options for ``source``; a UsageError for what would fail offline."""
    build = source.build
    if not build.requires:  # unread (Python 3.10): pip's own build isolation decides
        return []
    if build.missing and index_off:
        raise UsageError(f"{source.path / 'pyproject.toml'}: its build backend needs {', '.join(build.missing)}, "
                         "which is not installed here, and PIP_NO_INDEX turns the index off: install it first "
                         "or unset PIP_NO_INDEX")
    if build.missing:
        return []
    if editable and build.backend.startswith("hatchling") and not build.hatch_dev_mode_dirs \
            and not module_available("editables"):
        raise UsageError(f"{source.path / 'pyproject.toml'}: hatchling's editable install needs the 'editables' "
                         "package, which is not installed here: add `dev-mode-dirs = [\"src\"]` (the folder "
                         "holding your package) under [tool.hatch.build.targets.wheel], or install editables")
    return ["--no-build-isolation"]
