"""``cmx plugins list|search|info|install|uninstall|new``.

``install``/``uninstall`` run pip in the current interpreter's environment
(``sys.executable -m pip``); an in-tree registry entry installs from the checkout. ``new``
renders the Jinja2 templates in ``cmx_core/templates/plugin``. Every function the handlers
call is typed and usable from Python.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import site
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.version import Version

from cmx_core import __version__
from cmx_core.cli.main import common_options
from cmx_core.errors import CmxError, UsageError
from cmx_core.plugins import install as plugin_install
from cmx_core.plugins.install import find_entry, require_entry, shell_line, wheel_install_hint
from cmx_core.plugins.loader import SLOW_IMPORT_S, get_registry, reset_registry
from cmx_core.plugins.pip_run import run_pip as run_pip_quietly
from cmx_core.plugins.registry_yaml import normalize, read_registry
from cmx_core.results.grid import Column, Grid, fit, fit_text, width_for
from cmx_core.run.settings import describe_settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cmx_core.plugins.registry_yaml import Entry, RegistryFile

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent / "templates"
TEMPLATES = TEMPLATE_ROOT / "plugin"
SUITE_TEMPLATES = TEMPLATE_ROOT / "suite"
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def add_parser(subparsers: Any) -> None:
    """Add ``cmx plugins`` and its subcommands (``cmx plugins`` alone lists)."""
    parser = subparsers.add_parser(
        "plugins", help="list, find, install and scaffold plugins", parents=common_parents(),
        description="Installed plugins, the plugin registry, and a plugin scaffold.")
    parser.set_defaults(handler=cmd_list)
    sub = parser.add_subparsers(dest="plugins_command", metavar="COMMAND")

    def command(name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
        child: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=common_parents())
        child.set_defaults(handler=handler)
        return child

    command("list", "installed plugins: version, hooks, what they provide, load errors",
            cmd_list)
    command("search", "search the registry (installed or not)", cmd_search).add_argument(
        "text", help="text to look for in names, summaries, keywords and provided names")
    command("info", "one registry entry and whether it is installed", cmd_info).add_argument(
        "name", help="registry name or distribution")
    install = command("install", "pip-install plugins from the registry", cmd_install)
    install.add_argument("names", nargs="+", metavar="NAME")
    install.add_argument("--editable", action=argparse.BooleanOptionalAction, default=None,
                         help="editable install of in-tree and local plugins (development; default: editable when "
                              "the plugin's source directory is installed editable now)")
    install.add_argument("--upgrade", action="store_true", help="pass --upgrade to pip")
    install.add_argument("--dry-run", action="store_true",
                         help="print the pip command instead of running it")
    uninstall = command("uninstall", "pip-uninstall plugins", cmd_uninstall)
    uninstall.add_argument("names", nargs="+", metavar="NAME")
    uninstall.add_argument("--dry-run", action="store_true",
                           help="print the pip command instead of running it")
    wheels = command("wheelhouse", "a folder of wheels holding cmx-core (built from this checkout) and what it "
                     "needs, for a plugin's development venv", cmd_wheelhouse)
    wheels.add_argument("dir", type=Path, help="the folder to fill (made when missing)")
    wheels.add_argument("--with", dest="requirements", action="append", default=[], metavar="REQUIREMENT",
                        help="another requirement to add with its dependencies, e.g. pytest (repeatable)")
    new = command("new", "scaffold a new plugin package from the template", cmd_new)
    new.add_argument("name", help="plugin name, e.g. 'acme-gpu' (distribution cmx-acme-gpu)")
    new.add_argument("--dir", type=Path, default=None,
                     help="parent directory of the new package (default: the current one)")
    new.add_argument("--summary", default=None, help="one-line description")
    new.add_argument("--suite", action="store_true",
                     help="scaffold a measuring suite: its result-section schema, a measured step, a recipe "
                          "with `measures: true` and the conformance test")


def common_parents() -> list[argparse.ArgumentParser]:
    """The options every cmx command takes (``--json``, ``--strict-plugins``...)."""
    return [common_options()]


def _emit(args: argparse.Namespace, document: Any, text: str, whole: bool = False) -> None:
    """The one JSON document, or ``text`` fitted to the terminal (``whole``: a command line to
    copy, never wrapped)."""
    if getattr(args, "json", False):
        print(json.dumps(document, indent=2, sort_keys=True, default=str))
    else:
        print(text if whole else fit_text(text, width_for(getattr(args, "wide", False))))


# --------------------------------------------------------------------------- list


def installed_summary() -> dict[str, Any]:
    """What ``cmx plugins list --json`` prints: every loaded plugin and the conflicts."""
    loaded = get_registry()
    loaded.collect_all()
    plugins = []
    for name, info in sorted(loaded.plugins.items(), key=lambda item: (item[0] != "cmx-core", item[0])):
        module = loaded.manager.get_plugin(name)
        hooks = sorted(c.name for c in loaded.manager.get_hookcallers(module) or []) \
            if module is not None else []
        plugins.append({
            "name": name, "distribution": info.distribution, "version": info.version,
            "module": info.module, "hooks": hooks,
            "provides": {k: sorted(v) for k, v in info.provides.items()},
            "recipe_paths": [str(p) for owner, p in loaded.recipe_paths if owner == name],
            "capabilities": _capabilities(loaded, name),
            "error": info.error,
            "import_ms": None if info.import_s is None else round(info.import_s * 1000, 1),
        })
    conflicts = {k: list(v) for k, v in loaded.conflicts.items()}
    return {"plugins": plugins, "conflicts": conflicts}


def _capabilities(loaded: Any, plugin: str) -> dict[str, list[str]]:
    """Provider name -> the capabilities it needs (docker, gpu, network...), when any."""
    found: dict[str, list[str]] = {}
    for kind in ("steps", "executors"):
        for name, provider in getattr(loaded, kind).items():
            if provider.plugin == plugin and provider.capabilities.names():
                found[name] = provider.capabilities.names()
    return found


def cmd_list(args: argparse.Namespace) -> int:
    summary = installed_summary()
    for plugin in summary["plugins"]:
        if plugin["import_ms"] is not None and plugin["import_ms"] > SLOW_IMPORT_S * 1000:
            print(f"cmx: warning: plugin '{plugin['name']}' takes {plugin['import_ms']:.0f} ms to import, which every "
                  "cmx command pays (--help included); import heavy modules inside the functions that need them",
                  file=sys.stderr)
    _emit(args, summary, _list_text(summary))
    return 0


def _list_text(summary: dict[str, Any]) -> str:
    lines = []
    for p in summary["plugins"]:
        provided = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(p["provides"].items()))
        took = f"  (import {p['import_ms']:.0f} ms)" if p["import_ms"] is not None else ""
        lines.append(f"{p['name']:<12} {p['distribution']} {p['version']}{took}")
        if provided:
            lines.append(f"    provides  {provided}")
        for provider, needs in sorted(p["capabilities"].items()):
            lines.append(f"    needs     {provider}: {', '.join(needs)}")
        if p["hooks"]:
            lines.append(f"    hooks     {', '.join(p['hooks'])}")
        if p["error"]:
            lines.append(f"    ERROR     {p['error']}")
    for name, owners in summary["conflicts"].items():
        lines.append(f"conflict: '{name}' is registered by {' and '.join(owners)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- search / info


def entry_document(entry: Any, installed: dict[str, str], registry: RegistryFile | None = None) -> dict[str, Any]:
    install_hint = wheel_install_hint(registry, entry) if registry is not None else f"cmx plugins install {entry.name}"

    return {
        "name": entry.name, "distribution": entry.distribution, "summary": entry.summary,
        "state": entry.state, "source": {k: v for k, v in vars(entry.source).items() if v},
        "provides": entry.provides.as_dict(), "cmx_core": entry.cmx_core,
        "license": entry.license, "homepage": entry.homepage,
        "maintainers": [{k: v for k, v in vars(m).items() if v} for m in entry.maintainers],
        "requires_plugins": list(entry.requires_plugins), "deprecated_by": entry.deprecated_by,
        "installed": installed.get(normalize(entry.distribution)),
        "install": install_hint,
    }


def _installed_versions() -> dict[str, str]:
    """Normalised distribution -> version of everything that declares a ``cmx`` entry point."""
    found: dict[str, str] = {}
    for entry in metadata.entry_points(group="cmx"):
        if entry.dist is not None:
            found[normalize(entry.dist.metadata["Name"])] = entry.dist.version
    return found


def cmd_search(args: argparse.Namespace) -> int:
    registry = read_registry()
    installed = _installed_versions()
    results = [entry_document(e, installed, registry) for e in registry.search(args.text)]
    columns = (Column("name", whole=True), Column("state", whole=True, drop=1),
               Column("installed", whole=True, drop=2), Column("summary"))
    grid = Grid(columns, tuple((r["name"], r["state"], _installed_label(r["installed"]), r["summary"])
                               for r in results), header=False)
    text = fit(grid, width_for(args.wide)).text().rstrip("\n") if results else ""
    _emit(args, {"query": args.text, "results": results}, text or f"no plugin in the registry matches '{args.text}'")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    registry = read_registry()

    loaded = _loaded_plugin(args.name)
    if find_entry(registry, args.name) is None and loaded is not None:
        return _info_unlisted(args, loaded)
    entry = _require(registry, args.name)
    doc = entry_document(entry, _installed_versions(), registry)
    broken = loaded or _loaded_of_distribution(entry.distribution)
    doc["error"], doc["traceback"] = (broken.error, broken.traceback) if broken else (None, None)
    dist = "" if entry.distribution == entry.name else f" (distribution {entry.distribution})"
    text = [f"{doc['name']}{dist} - {doc['summary']}",
            f"  state       {doc['state']}",
            f"  source      {entry.source.describe()}",
            f"  cmx-core    {doc['cmx_core']}",
            f"  license     {doc['license']}",
            f"  installed   {doc['installed'] or 'no'}"]
    text += [f"  {kind:<11} {', '.join(names)}" for kind, names in doc["provides"].items()]
    if entry.deprecated_by:
        text.append(f"  deprecated: use {entry.deprecated_by}")
    text.append(f"  install     {doc['install']}")
    if doc["error"]:
        text += [f"  ERROR       {doc['error']}", *(f"    {line}" for line in (doc["traceback"] or "").splitlines())]
    doc["executor_settings"] = executor_settings(entry.distribution)
    for executor, settings in doc["executor_settings"].items():
        text.append(f"  executor {executor}: --executor-opt KEY=VALUE")
        text += [f"    {s['name']:<12} {s['type']:<16} default {s['default']:<8} {s['help']}" for s in settings]
        if not settings:
            text.append("    (no settings)")
    _emit(args, doc, "\n".join(text))
    return 0


def _loaded_plugin(name: str) -> Any:
    """The PluginInfo of the loaded (or failed) plugin of entry-point name ``name``, or None."""
    if name == "cmx-core":
        return None
    registry = get_registry()
    registry.collect_all()  # a registration hook that raises shows only once it is called
    return registry.plugins.get(name)


def _loaded_of_distribution(distribution: str) -> Any:
    """The first plugin of ``distribution`` that failed to load, or None."""
    registry = get_registry()
    registry.collect_all()
    return next((i for i in registry.plugins.values()
                 if normalize(i.distribution) == normalize(distribution) and i.error), None)


def _info_unlisted(args: argparse.Namespace, info: Any) -> int:
    """``cmx plugins info NAME`` for an installed plugin that no registry entry lists."""
    doc = {"name": info.name, "distribution": info.distribution, "installed": info.version, "module": info.module,
           "in_registry": False, "provides": info.provides, "error": info.error, "traceback": info.traceback}
    text = [f"{info.name} (distribution {info.distribution} {info.version}, not in the registry)",
            f"  module      {info.module}"]
    text += [f"  {kind:<11} {', '.join(names)}" for kind, names in sorted(info.provides.items())]
    if info.error:
        text += [f"  ERROR       {info.error}", *(f"    {line}" for line in (info.traceback or "").splitlines())]
    _emit(args, doc, "\n".join(text))
    return 0


def executor_settings(distribution: str) -> dict[str, list[dict[str, str]]]:
    """The settings of each executor the installed ``distribution`` registers."""
    registry = get_registry()
    owners = {name for name, info in registry.plugins.items() if info.distribution == distribution}
    return {name: [row._asdict() for row in describe_settings(executor.settings)]
            for name, executor in sorted(registry.executors.items()) if executor.plugin in owners}


# --------------------------------------------------------------------------- install


def install_command(names: list[str], *, editable: bool | None = False, upgrade: bool = False) -> list[str]:
    """The pip command installing registry entries ``names`` (and the plugins they need)."""
    return plugin_install.install_command(read_registry(), names, editable=editable, upgrade=upgrade)


def _require(registry: RegistryFile, name: str) -> Entry:
    """The registry entry of ``name`` (registry, distribution or entry-point name)."""
    return require_entry(registry, name)


def uninstall_command(names: list[str]) -> list[str]:
    """The pip command removing installed plugins; one that is not installed is refused."""
    return plugin_install.uninstall_command(read_registry(), names)


def run_pip(command: list[str]) -> None:
    """Run pip, its progress on stderr (stdout stays for ``--json``), a failure in one line."""
    run_pip_quietly(command, shell_line(command))


def cmd_install(args: argparse.Namespace) -> int:
    command = install_command(args.names, editable=args.editable, upgrade=args.upgrade)
    if not args.dry_run:
        run_pip(command)
    return _after_pip(args, command, args.names)


def cmd_wheelhouse(args: argparse.Namespace) -> int:
    from cmx_core.plugins import wheelhouse  # deferred: only this command needs it

    directory = args.dir.expanduser().absolute()
    wheels = wheelhouse.build(directory, args.requirements, run_pip)  # (args.extra is the parser's leftovers)
    core = next(w.name for w in wheels if w.name.startswith("cmx_core-"))
    install = shell_line(["python", "-m", "pip", "install", "--find-links", str(directory), "cmx-core"])
    _emit(args, {"directory": str(directory), "wheels": [w.name for w in wheels], "install": install},
          f"{directory}: {len(wheels)} wheels ({core} and what it needs); install cmx-core in your venv with:")
    if not args.json:
        print(f"  {install}")  # a line of its own, never wrapped: it is copied
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    command = uninstall_command(args.names)
    if not args.dry_run:
        run_pip(command)
    return _after_pip(args, command, args.names)


def _after_pip(args: argparse.Namespace, command: list[str], names: list[str]) -> int:
    importlib.invalidate_caches()
    for folder in site.getsitepackages():  # an editable install's new .pth puts its src/ on sys.path
        site.addsitedir(folder)
    reset_registry()
    doc: dict[str, Any] = {"command": command, "shell": shell_line(command), "dry_run": args.dry_run,
                           "names": names}
    if not args.dry_run:
        doc["plugins"] = installed_summary()["plugins"]
        broken = [p for p in doc["plugins"] if p["error"]]
        for plugin in broken:
            print(f"cmx: warning: plugin {plugin['name']}: {plugin['error']}", file=sys.stderr)
    verb = "installed" if command[3] == "install" else "uninstalled"
    _emit(args, doc, shell_line(command) if args.dry_run else f"{verb}: {' '.join(names)}", whole=args.dry_run)
    return 0


# --------------------------------------------------------------------------- new


@dataclass(frozen=True)
class Scaffold:
    """The names a new plugin package gets from ``cmx plugins new NAME``."""

    short: str
    distribution: str
    package: str
    summary: str
    core_spec: str

    @classmethod
    def from_name(cls, name: str, summary: str | None = None) -> Scaffold:
        short = name.lower().removeprefix("cmx-")
        if not _NAME.match(short):
            raise UsageError(f"plugin name '{name}': use lower-case words joined by '-', "
                             "e.g. 'acme-gpu'")
        return cls(short, f"cmx-{short}", "cmx_" + short.replace("-", "_"),
                   summary or f"cmx plugin {short}", core_requirement())


def core_requirement() -> str:
    """The cmx-core range a new plugin should declare: this minor series (0.x) or major."""
    v = Version(__version__)
    upper = f"{v.major}.{v.minor + 1}" if v.major == 0 else f"{v.major + 1}"
    return f">={v.major}.{v.minor},<{upper}"


def scaffold_plugin(name: str, parent: Path, summary: str | None = None, *, suite: bool = False) -> Path:
    """Render the plugin template (or, with ``suite``, the suite template) into
    ``parent/cmx-NAME``; refuses a non-empty target."""
    import jinja2  # deferred: heavy, only `cmx plugins new` renders templates

    templates = SUITE_TEMPLATES if suite else TEMPLATES
    names = Scaffold.from_name(name, summary)
    target = parent / names.distribution
    if target.exists() and any(target.iterdir()):
        raise UsageError(f"{target} exists and is not empty; choose another --dir or name")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)), keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False)
    underscored = names.short.replace("-", "_")
    context = {**vars(names), "step": f"{names.short}.{'measure' if suite else 'hello'}",
               "module": names.package, "test_prefix": underscored, "section": underscored}
    for template in sorted(templates.rglob("*.j2")):
        relative = template.relative_to(templates).as_posix()[: -len(".j2")]
        relative = relative.replace("PKG", names.package).replace(
            "NAME", context["test_prefix"]).replace("SHORT", names.short)
        out = target / relative
        out.parent.mkdir(parents=True, exist_ok=True)
        rendered = env.get_template(template.relative_to(templates).as_posix()).render(context)
        out.write_text(rendered, encoding="utf-8")
    return target


def cmd_new(args: argparse.Namespace) -> int:
    parent = (args.dir or Path.cwd()).expanduser()
    try:
        target = scaffold_plugin(args.name, parent, args.summary, suite=args.suite)
    except OSError as exc:
        raise CmxError(f"cannot write the plugin into {parent}: {exc.strerror}") from None
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    _emit(args, {"path": str(target), "files": files},
          f"created {target}\n  next: cmx plugins install --editable {shell_line([f'{target}[test]'])} && "
          f"python -m pytest {shell_line([str(target / 'tests')])}")
    return 0


def _installed_label(version: str | None) -> str:
    return f"installed {version}" if version else "not installed"
