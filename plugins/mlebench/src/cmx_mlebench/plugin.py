"""cmx hook implementations of cmx-mlebench: the ``mlebench.*`` step types, the
``mle-bench`` suite with the schema of its ``mle_bench`` result section, and the recipes.

Importing this module costs next to nothing: pandas, scikit-learn and the sandbox are
imported only when a step runs.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import Capabilities, StepContext, StepOutput, StepType, Suite, hookimpl

SECTION_SCHEMA = Path(__file__).parent / "schemas" / "mle_bench.schema.json"

LOCATION = {
    "competition": "competition id (an offline one such as sklearn-digits, or one prepared in data_dir)",
    "data_dir": "MLE-bench data directory holding <id>/prepared/{public,private}, used as-is (optional)",
    "competitions_dir": "MLE-bench competition definitions (<id>/config.yaml, leaderboard.csv) (optional)",
}
AGENT = {
    "agent_cmd": "the agent's command line, split with shlex (no shell on the host)",
    "time_limit_s": "wall-clock limit of the agent in seconds",
    "memory_gb": "memory limit of the agent in GiB (0: none)",
    "cpus": "CPUs the agent may use (0: all)",
    "processes": "most processes and threads the agent may run",
    "keep_mb": ("most MiB of the agent's own files brought back to the run directory, smallest first "
                "(the rest listed as dropped)"),
    "sandbox": "sandbox backend: bubblewrap (default) or docker (needs its plugin)",
    "agent_env": "comma list of the agent's Python environments, mounted read-only (default: cmx's own)",
    "agent_dir": "directory of the agent's code, copied into /home/agent (optional)",
    "shm_size": "docker sandbox: shared memory size (MLE-bench: 4G)",
    "gpus": "docker sandbox: GPUs to request (-1: all, as MLE-bench)",
}


def _lazy(module: str, function: str) -> Callable[[StepContext], StepOutput]:
    def run(ctx: StepContext) -> StepOutput:
        return getattr(importlib.import_module(module), function)(ctx)  # type: ignore[no-any-return]

    return run


def _still_valid(outputs: Mapping[str, Any]) -> bool:
    from cmx_mlebench.prepare import still_valid  # deferred: start-up: 12 modules not needed to start cmx

    return still_valid(outputs)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="mlebench.prepare", summary="Prepare an MLE-bench competition's split (cached, checksummed)",
                      run=_lazy("cmx_mlebench.steps", "prepare_step"), params=LOCATION, validate=_still_valid))
    register(StepType(name="mlebench.grade", summary="Grade one submission.csv as MLE-bench does",
                      run=_lazy("cmx_mlebench.steps", "grade_step"),
                      params={"submission": "the submission.csv to grade"}, measures=True))
    register(StepType(name="mlebench.attempt", summary="Run an agent in the sandbox on one competition, then grade it",
                      run=_lazy("cmx_mlebench.steps", "attempt_step"), params={**AGENT, "seed": "the run's seed"},
                      measures=True, capabilities=Capabilities(runs_untrusted_code=True)))
    register(StepType(name="mlebench.seeds",
                      summary="Run an agent over seeds (and competitions) as one run each; aggregate any-medal %",
                      run=_lazy("cmx_mlebench.seeds", "seeds_step"),
                      params={**LOCATION, **AGENT, "seeds": "how many seeds (runs per competition)",
                              "split": "lite or all: every competition of the split available locally",
                              "jobs": "runs at once"},
                      measures=True, capabilities=Capabilities(runs_untrusted_code=True)))


@hookimpl
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    register(Suite(name="mle-bench", summary="MLE-bench competitions: medals against the leaderboard, seed aggregates",
                   section="mle_bench", schema=json.loads(SECTION_SCHEMA.read_text(encoding="utf-8")),
                   required_for=("valid", "invalid", "partial")))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
