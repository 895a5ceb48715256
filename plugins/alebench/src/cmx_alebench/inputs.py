"""Case inputs: ``gen SEED`` run confined once per problem and seed, kept in the cmx cache.

The cache key is the digest of the problem's tools and data.json, so an edited generator
makes new inputs. Files are written to a temporary name and renamed (never half-written).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cmx_alebench.problem import Problem
from cmx_alebench.runner import Ending, Runner
from cmx_alebench.tools import Tools
from cmx_core.errors import StepFailed


def problem_digest(problem: Problem) -> str:
    """sha256 over data.json, the built-tools record and every file of tools/ (names and bytes)."""
    digest = hashlib.sha256((problem.root / "data.json").read_bytes())
    record = problem.root / "cmx-tools.json"
    if record.is_file():
        digest.update(record.read_bytes())
    for path in sorted((problem.root / "tools").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(problem.root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def case_inputs(runner: Runner, problem: Problem, seeds: Sequence[int], cache: Path) -> dict[int, bytes]:
    """The input of every seed, generated where the cache lacks it."""
    folder = cache / "alebench" / "inputs" / f"{problem.problem_id}-{problem_digest(problem)}"
    folder.mkdir(parents=True, exist_ok=True)
    tools = Tools.of(problem.root)
    out: dict[int, bytes] = {}
    for seed in seeds:
        path = folder / f"{seed}.txt"
        if not path.is_file():
            _write(path, _generate(runner, tools, seed, folder))
        out[seed] = path.read_bytes()
    return out


def _generate(runner: Runner, tools: Tools, seed: int, folder: Path) -> bytes:
    with tempfile.TemporaryDirectory(dir=folder, prefix="gen-") as work:
        ran = runner.run(tools.gen_call(seed, Path(work)))
        made = tools.generated(ran.stdout, Path(work))
    if ran.ending is not Ending.EXITED or ran.exit_code != 0 or not made:
        name = "gen" if tools.binary else "gen.py"
        raise StepFailed(f"{tools.folder}/{name} {seed} failed: {ran.reason}; "
                         f"{ran.stderr.decode(errors='replace').strip()[-200:]}")
    return made


def _write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
