"""``cmx registry check``: validate ``registry.yaml`` and the claims of installed plugins."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.cli.plugins_cmd import common_parents
from cmx_core.plugins.loader import get_registry
from cmx_core.plugins.registry_check import check_installed
from cmx_core.plugins.registry_yaml import RegistryFile, is_packaged, registry_path, validate_file
from cmx_core.results.grid import fit_text, width_for


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "registry", help="check the plugin registry (registry.yaml)",
        description="The plugin registry: what every known plugin provides.")
    sub = parser.add_subparsers(dest="registry_command", metavar="COMMAND", required=True)

    check = sub.add_parser(
        "check", help="validate registry.yaml and what installed plugins really register",
        parents=common_parents(),
        description="Validate registry.yaml against its JSON Schema and its in-tree "
        "packages, then compare each installed plugin's entry with what it registers.")
    check.add_argument("--file", type=Path, default=None,
                       help="registry file (default: CMX_REGISTRY, the checkout's, the package's)")
    check.add_argument("--no-installed", action="store_true",
                       help="skip the comparison with installed plugins")
    check.set_defaults(handler=cmd_check)


@dataclass
class CheckReport:
    """The outcome of ``cmx registry check``."""

    path: Path
    entries: int = 0
    installed_checked: int = 0
    problems: list[Any] = field(default_factory=list)
    packaged: bool = False
    """The registry is the copy inside an installed cmx_core (in-tree sources not compared)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "ok": self.ok, "entries": self.entries,
                "installed_checked": self.installed_checked, "packaged": self.packaged,
                "problems": [p.as_dict() | {"text": str(p)} for p in self.problems]}


def check_registry(path: Path | None = None, *, installed: bool = True) -> CheckReport:
    """Schema, consistency and (with ``installed``) claims-vs-reality problems of a registry."""
    path = path or registry_path()
    report = CheckReport(path, packaged=is_packaged(path))
    problems, entries = validate_file(path)
    report.problems.extend(problems)
    report.entries = len(entries)
    if installed and entries:
        found, checked = check_installed(RegistryFile(path, tuple(entries)), get_registry())
        report.problems.extend(found)
        report.installed_checked = checked
    return report


def cmd_check(args: argparse.Namespace) -> int:
    report = check_registry(args.file, installed=not args.no_installed)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        for problem in report.problems:
            print(problem)  # one line each, naming the file, entry and key (grep-able)
        verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        shipped = " (the copy shipped with cmx-core: in-tree sources are not compared)" if report.packaged else ""
        print(fit_text(f"{report.entries} entries, {report.installed_checked} installed and compared{shipped}: "
                       f"{verdict} ({report.path})", width_for(args.wide)))
    return 0 if report.ok else 2
