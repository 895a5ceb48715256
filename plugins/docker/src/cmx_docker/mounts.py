"""Read-only bind mounts for a plan's ``type: path`` inputs (a model directory, a data set).

The container replays the run's lock, so it sees exactly the inputs the host resolved: a
path input's value must name the same files inside. Each existing path is therefore mounted
read-only at its own (resolved) host path, like the run directory and the cache, and the
step gets the path it was given. Nothing outside what a recipe declares as a path is mounted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cmx_docker.runopts import Mount

if TYPE_CHECKING:
    from cmx_core.api import Plan


def path_input_mounts(plan: Plan, already: tuple[Path, ...] = ()) -> tuple[Mount, ...]:
    """A read-only mount for every existing file or directory that a ``type: path`` input of
    any node names, except those inside ``already`` (mounted anyway) or inside another."""
    found: list[Path] = []
    for node in plan.nodes:
        for name, spec in node.recipe.inputs.items():
            value = node.inputs.get(name)
            if spec.type != "path" or not value:
                continue
            path = Path(str(value)).expanduser().resolve()
            if path.exists() and path not in found:
                found.append(path)
    covered = [*(p.resolve() for p in already)]
    mounts: list[Mount] = []
    for path in sorted(found, key=lambda p: len(p.parts)):
        if any(path == c or c in path.parents for c in covered):
            continue
        covered.append(path)
        mounts.append(Mount(str(path), str(path), read_only=True))
    return tuple(mounts)
