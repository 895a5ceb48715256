"""A competition as MLE-bench defines it: ``config.yaml`` (id, name, dataset paths, the grader,
the preparer), ``description.md`` and ``leaderboard.csv`` in a definition directory, and the
prepared split under a data root: ``<data>/<id>/prepared/public`` (what the agent sees) and
``<data>/<id>/prepared/private`` (the answers). Keys this project does not use are accepted
as MLE-bench writes them; the ones it needs are checked and named when wrong.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import ResultsError, UsageError

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
LEADERBOARD_SOURCES = ("kaggle", "synthetic")

GradeFn = Callable[[Any, Any], float]


def check_id(competition: str) -> str:
    if not isinstance(competition, str) or not ID_PATTERN.match(competition):
        raise UsageError(f"--competition {competition!r}: a competition id is lower case letters, digits, '.', "
                         "'-' and '_' (e.g. --competition=sklearn-digits)")
    return competition


@dataclass(frozen=True)
class CompetitionConfig:
    """The keys of ``config.yaml`` this project reads."""

    id: str
    name: str
    competition_type: str
    awards_medals: bool
    description: str
    answers: str
    sample_submission: str
    grader_name: str
    grade_fn: str
    preparer: str
    leaderboard_source: str


def _need(mapping: Mapping[str, Any], key: str, where: str, kind: type = str) -> Any:
    value = mapping.get(key) if isinstance(mapping, Mapping) else None
    if not isinstance(value, kind) or (kind is str and not value):
        raise ResultsError(f"{where}: key '{key}' must be a {'non-empty string' if kind is str else kind.__name__}; "
                           "fix the competition's config.yaml")
    return value


def parse_config(data: Any, source: str) -> CompetitionConfig:
    """A ``config.yaml`` document; a missing or mistyped key is a one-line ResultsError."""
    if not isinstance(data, Mapping):
        raise ResultsError(f"{source}: a competition config is a mapping with id, name, dataset and grader")
    dataset = _need(data, "dataset", source, Mapping)
    grader = _need(data, "grader", source, Mapping)
    source_label = data.get("leaderboard_source", "kaggle")
    if source_label not in LEADERBOARD_SOURCES:
        raise ResultsError(f"{source}: leaderboard_source {source_label!r} must be one of "
                           f"{', '.join(LEADERBOARD_SOURCES)}")
    awards = data.get("awards_medals", True)
    return CompetitionConfig(
        id=check_id(_need(data, "id", source)), name=_need(data, "name", source),
        competition_type=str(data.get("competition_type", "simple")), awards_medals=bool(awards),
        description=str(data.get("description", "description.md")),
        answers=_need(dataset, "answers", f"{source}: dataset"),
        sample_submission=_need(dataset, "sample_submission", f"{source}: dataset"),
        grader_name=str(grader.get("name", "")), grade_fn=_need(grader, "grade_fn", f"{source}: grader"),
        preparer=str(data.get("preparer", "")), leaderboard_source=str(source_label))


def read_config(path: Path) -> CompetitionConfig:
    import yaml  # deferred: yaml only when this runs (27 modules)

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the competition config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ResultsError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}); fix the competition's config.yaml") \
            from None
    return parse_config(data, str(path))


@dataclass(frozen=True)
class Competition:
    """A definition directory and the data root that holds its prepared split."""

    config: CompetitionConfig
    definition_dir: Path
    data_root: Path

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def public_dir(self) -> Path:
        return self.data_root / self.id / "prepared" / "public"

    @property
    def private_dir(self) -> Path:
        return self.data_root / self.id / "prepared" / "private"

    @property
    def answers(self) -> Path:
        return self.data_root / self.config.answers

    @property
    def sample_submission(self) -> Path:
        return self.data_root / self.config.sample_submission

    @property
    def leaderboard(self) -> Path:
        return self.definition_dir / "leaderboard.csv"

    def grade_fn(self) -> GradeFn:
        return load_function(self.config.grade_fn, f"{self.definition_dir / 'config.yaml'}: grader.grade_fn")


def load_competition(definition_dir: Path, data_root: Path) -> Competition:
    config = read_config(definition_dir / "config.yaml")
    if config.id != definition_dir.name:
        raise ResultsError(f"{definition_dir / 'config.yaml'}: id {config.id!r} differs from its directory's name "
                           f"{definition_dir.name!r}; fix the config or rename the directory")
    return Competition(config, definition_dir, data_root)


def load_function(reference: str, where: str) -> Callable[..., Any]:
    """``package.module:function``, imported; a bad or missing one is a one-line ResultsError."""
    module_name, sep, name = reference.partition(":")
    if not sep or not module_name or not name.isidentifier():
        raise ResultsError(f"{where}: {reference!r} must be 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = " (MLE-bench's own graders need the mlebench package: pip install mlebench)" \
            if module_name.startswith("mlebench.") else ""
        raise ResultsError(f"{where}: cannot import {module_name} ({exc}){hint}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ResultsError(f"{where}: {module_name} has no function {name!r}")
    return function  # type: ignore[no-any-return]
