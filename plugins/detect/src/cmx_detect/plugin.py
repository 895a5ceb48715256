"""cmx-detect's hook implementations. Importing this module must stay cheap (~1 ms): the
detectors, parsers and the CLI are imported only when used."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from cmx_core.api import Command, Detector, hookimpl, register_template_function
from cmx_detect.detectors import SPECS
from cmx_detect.live import bound
from cmx_detect.models import detected_model

PLUGIN = "cmx-detect"


def _detected_model(models: Any, tags: Any) -> Any:
    """Template function ``detected_model(facts.models, TAGS)`` (docs/models.md)."""
    return detected_model(models, tags)


register_template_function("detected_model", _detected_model)


@hookimpl
def cmx_register_detectors(register: Callable[[Detector], None]) -> None:
    for spec in SPECS:
        register(Detector(name=spec.name, summary=spec.summary, detect=partial(bound, spec.detect),
                          fingerprint=partial(bound, spec.fingerprint), ttl_s=spec.ttl_s, plugin=PLUGIN,
                          check=_check_accelerator if spec.name == "accelerator" else None))


def _check_accelerator(value: Any, where: str) -> None:
    """``requires: {accelerator: TAG}`` must name a known tag (see the README's table)."""
    from cmx_detect.tags import check_tag  # deferred: start-up: the tag table, for a recipe that requires one

    check_tag(str(value), where)


@hookimpl
def cmx_register_commands(register: Callable[[Command], None]) -> None:
    register(Command(name="detect", summary="Detect the machine's facts (OS, CPU, CUDA, GPUs, torch...)",
                     configure=_configure, run=_run, plugin=PLUGIN))


def _configure(parser: Any) -> None:
    from cmx_detect.cli import configure  # deferred: start-up: 13 modules not needed to start cmx

    configure(parser)


def _run(args: Any) -> int:
    from cmx_detect.cli import run  # deferred: start-up: 13 modules not needed to start cmx

    return run(args)


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
