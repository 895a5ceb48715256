"""``cmx ale-bench import PATH...``: ALE-Bench problem packages as they come (a zip or a
directory) made ready to judge.

Each package is checked (``data.json``, the tables, the tools; one-line errors naming the
file), its Rust ``tools/`` crate is built once into the cmx cache (:mod:`rust_build`; a
package with ``tools/gen.py`` and ``tools/tester.py`` needs no build), and the package is
copied to ``<cache>/alebench/problems/<problem_id>`` (or ``--dest``) with ``cmx-tools.json``
beside its ``data.json`` saying where the built binaries are. The evaluation recipes search
that folder after ``--problems_dir`` and before the shipped problems.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cmx_alebench.problem import load_problem
from cmx_alebench.rust_build import build_tools
from cmx_alebench.tools import BUILT_RECORD
from cmx_core.errors import UsageError


def imported_dir(cache: Path) -> Path:
    return cache / "alebench" / "problems"


@dataclass(frozen=True)
class Imported:
    problem_id: str
    source: str
    dest: Path
    tools: str              # rust (built or reused) or python
    bin_dir: str | None
    built_now: bool
    crate_digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {"problem_id": self.problem_id, "source": self.source, "dest": str(self.dest), "tools": self.tools,
                "bin_dir": self.bin_dir, "built_now": self.built_now, "crate_digest": self.crate_digest}


def _extract(archive: Path, into: Path) -> None:
    """Unzip ``archive`` refusing absolute paths, ``..`` and links."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts:
                    raise UsageError(f"{archive}: member {info.filename!r} leaves the package; refusing the zip")
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise UsageError(f"{archive}: member {info.filename!r} is a symbolic link; refusing the zip")
            zipped.extractall(into)
    except zipfile.BadZipFile:
        raise UsageError(f"{archive}: not a zip file; give an ALE-Bench problem zip or its unzipped directory") \
            from None


def _package_root(folder: Path, source: Path) -> Path:
    if (folder / "data.json").is_file():
        return folder
    inner = [c for c in folder.iterdir() if c.is_dir() and (c / "data.json").is_file()]
    if len(inner) == 1:
        return inner[0]
    raise UsageError(f"{source}: no data.json at its top or in a single folder; not an ALE-Bench problem package")


def import_package(path: Path, cache: Path, dest: Path | None = None, vendor: Path | None = None) -> Imported:
    """Check, build and install one package (see the module docstring)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; give a problem zip or directory")
    target_root = dest or imported_dir(cache)
    target_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_root, prefix=".import-") as work:
        if path.is_dir():
            root = _package_root(path, path)
        else:
            _extract(path, Path(work) / "unzipped")
            root = _package_root(Path(work) / "unzipped", path)
        problem = load_problem(root)
        tools = root / "tools"
        record: dict[str, Any] | None = None
        if all((tools / n).is_file() for n in ("gen.py", "tester.py")):
            kind, built = "python", None
        elif (tools / "Cargo.toml").is_file():
            built = build_tools(tools, cache, vendor)
            kind = "rust"
            record = {"bin_dir": str(built.bin_dir), "crate_digest": built.digest, "registry": str(built.registry)}
        else:
            raise UsageError(f"{tools}: neither a Rust crate (Cargo.toml) nor gen.py and tester.py")
        stage = Path(work) / "stage"
        shutil.copytree(root, stage, ignore=shutil.ignore_patterns("target", BUILT_RECORD))
        if record is not None:
            (stage / BUILT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        final = target_root / problem.problem_id
        if final.exists():
            shutil.rmtree(final)
        stage.rename(final)
    return Imported(problem.problem_id, str(path), final, kind, record["bin_dir"] if record else None,
                    bool(built and built.built_now), built.digest if built else None)
