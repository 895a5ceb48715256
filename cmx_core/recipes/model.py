"""The recipe model: typed, immutable (NamedTuples: cheap to define and to build by the
thousand), validated with file:line:key errors.

Loading is two-phase for speed: :func:`cmx_core.recipes.check.validate_recipe_data` checks plain YAML data once
(when the catalog indexes a changed file) and :func:`recipe_from_data` builds the frozen
model from already-validated data without re-checking. Line numbers are looked up only when
an error is reported (:func:`line_of`), so the happy path never composes YAML nodes.

This module is the model and its building; reading YAML is :mod:`cmx_core.recipes.yaml_lines` and
validation :mod:`cmx_core.recipes.check`. Their public names stay importable from here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cmx_core.errors import UsageError, did_you_mean
from cmx_core.providers.recovery import CheckpointSpec, RetryPolicy
from cmx_core.recipes.durations import parse_duration
from cmx_core.recipes.resources import NO_RESOURCES, Resources, parse_resources
from cmx_core.recipes.retries import parse_checkpoint, parse_policy
from cmx_core.recipes.yaml_lines import dotted_key, line_of, parse_yaml, yaml_loader

__all__ = [
    "CLI_RESERVED_INPUTS", "CachePolicy", "DepSpec", "InputSpec", "OutputSpec", "Recipe", "StepSpec",
    "VariationSpec", "dotted_key", "line_of", "parse_duration", "parse_yaml",
    "recipe_from_data", "split_tags", "yaml_loader",
]

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
VARIATION_RE = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9_+-]*\.#|[A-Za-z0-9][A-Za-z0-9_+.-]*)$")
"""A variation name: ``fast``, a dotted one (``bert-99.9``, as CM names them: the exact name is
looked up before a parametric stem), or a parametric ``stem.#`` whose stem has no dot."""
INPUT_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")  # --foo-bar reaches foo_bar, never foo-bar
INPUT_TYPES = ("string", "number", "integer", "boolean", "choice", "path")

TOP_KEYS = {
    "name", "version", "tags", "summary", "description", "inputs", "variations", "deps",
    "steps", "outputs", "requires", "container", "cache", "resources", "retries",
}
INPUT_KEYS = {"type", "default", "min", "max", "choices", "required", "description"}
VARIATION_KEYS = {"group", "default", "description", "requires", "inputs", "deps", "container", "resources"}
DEP_KEYS = {"tags", "as", "with", "when", "version", "cached_alternatives"}
STEP_KEYS = {"uses", "id", "with", "when", "timeout_s", "measures", "retries", "checkpoint"}
OUTPUT_KEYS = {"description", "value", "type"}

#: Input names that ``cmx run``/``cmx plan`` take as cmx's own options (``--output`` is the
#: run directory): such an input is legal but must be given as ``--input.NAME=VALUE``.
CLI_RESERVED_INPUTS = frozenset({
    "output", "facts", "tags", "lock", "jobs", "executor", "container", "recipes", "json",
    "refresh", "no_cache", "strict_plugins", "verbose", "executor_opt", "input", "help",
    "allow_drift", "strict", "sweep_point", "plan_on_stdin", "quiet", "disable_plugin",
    "metrics_port", "no_telemetry", "telemetry_interval", "soak", "wide", "resume",
    "retries", "retry_on", "retry_backoff", "inject", "chaos", "runs",
})


class InputSpec(NamedTuple):
    """A typed recipe input."""

    name: str
    type: str
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] = ()
    required: bool = False
    description: str = ""

    def coerce(self, value: Any, origin: str) -> Any:
        """Convert ``value`` (a CLI string or a YAML value) to this input's type.

        ``origin`` names where the value came from, for the error message.
        """
        converted = _convert(self, value, origin)
        self._check_range(converted, origin)
        return converted

    def _check_range(self, value: Any, origin: str) -> None:
        if self.type in ("number", "integer"):
            if self.min is not None and value < self.min:
                raise UsageError(f"{origin}: input '{self.name}' = {value} is below the minimum {self.min}")
            if self.max is not None and value > self.max:
                raise UsageError(f"{origin}: input '{self.name}' = {value} is above the maximum {self.max}")
        if self.type == "choice" and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            hint = choice_hint(value, self.choices)
            where = f"--{self.name.replace('_', '-')}={value}" if origin == "--input" else origin
            raise UsageError(f"{where}: input '{self.name}' = {value!r} is not one of: {allowed}{hint}")


def choice_hint(value: Any, choices: tuple[Any, ...]) -> str:
    """``; did you mean 'Server'?`` for ``Sever`` (or ``server``): close or equal ignoring case."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    same = by_lower.get(str(value).lower())
    if same is not None:
        return f"; did you mean '{same}'?"
    close = did_you_mean(str(value).lower(), by_lower)
    for lower, shown in by_lower.items():
        close = close.replace(f"'{lower}'", f"'{shown}'")
    return close


def _convert(spec: InputSpec, value: Any, origin: str) -> Any:
    kind = spec.type
    try:
        if kind == "integer":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind == "number":
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number):  # NaN passes every min/max check and is not JSON
                raise ValueError(value)
            # one value, one form: 100, "100" and 100.0 are all 100 (the same cache key and
            # the same text in a step's argument); 2.5 stays 2.5
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
        if kind == "boolean":
            return _to_bool(value)
        if isinstance(value, (list, tuple, dict)):  # not its repr as text: the recipe means something else
            raise TypeError(value)
        if kind == "path":
            return str(Path(str(value)).expanduser()) if value is not None else None
        if kind == "choice":
            matches = [c for c in spec.choices if str(c) == str(value)]
            return matches[0] if matches else value
        return value if isinstance(value, str) else str(value)
    except (TypeError, ValueError):
        raise UsageError(
            f"{origin}: input '{spec.name}' expects {kind}, got {value!r}"
        ) from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


class DepSpec(NamedTuple):
    """A dependency on another recipe, selected by tags."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, which recipes never call
    tags: tuple[str, ...]
    alias: str
    with_: Mapping[str, Any] = {}
    when: str | None = None
    version: str | None = None
    origin: str = "deps"  # the key path, e.g. "deps" or "variations.cuda.deps"
    cached_alternatives: tuple[tuple[str, ...], ...] = ()
    """Tags taken instead of ``tags`` when the recipe they select has a valid cache entry and
    the one ``tags`` selects has none: the first such, in order (CM's rule for a dep that
    matches several scripts: one already in the cache first)."""


class VariationSpec(NamedTuple):
    """A variation: grouped members are exclusive; ``parametric`` ones carry a value."""

    name: str
    group: str | None = None
    default: bool = False
    description: str = ""
    requires: Mapping[str, Any] = {}
    inputs: Mapping[str, Any] = {}
    deps: tuple[DepSpec, ...] = ()
    container: str | None = None
    resources: Resources = NO_RESOURCES
    """Replaces the recipe's ``resources:`` keys it sets when this variation is selected."""
    value_keys: tuple[str, ...] = ()
    """A parametric variation's ``resources:`` keys whose value is ``#`` (``nodes.#: {resources:
    {nodes: "#"}}``): they take the selected value (:func:`cmx_core.recipes.resources.node_resources`)."""

    @property
    def parametric(self) -> bool:
        return self.name.endswith(".#")

    @property
    def stem(self) -> str:
        """``batch_size`` for ``batch_size.#``."""
        return self.name[:-2] if self.parametric else self.name


class StepSpec(NamedTuple):
    """One step: a step type and its (template) parameters."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, which recipes never call
    uses: str
    id: str
    with_: Mapping[str, Any] = {}
    when: str | None = None
    timeout_s: float | None = None
    measures: bool | None = None
    """True: this step is a measurement (a benchmark) even if its step type, like ``python``
    or ``shell``, cannot say so; None: as the step type declares."""
    retries: RetryPolicy | None = None
    """The step's own recovery policy (None: the recipe's, :mod:`cmx_core.recipes.retries`)."""
    checkpoint: CheckpointSpec | None = None
    """A checkpoint directory kept across the step's attempts (docs/faults.md)."""


class OutputSpec(NamedTuple):
    name: str
    description: str = ""
    value: str | None = None
    type: str | None = None


class CachePolicy(NamedTuple):
    """``cache:`` of a recipe. ``measurements``: a measuring node may be served from the
    cache (labelled as a cached measurement); by default it is measured on every run."""

    enabled: bool = True
    expires_s: float | None = None
    measurements: bool = False


class Recipe(NamedTuple):
    """A validated recipe. ``digest`` is the sha256 of the file's bytes."""

    name: str
    tags: tuple[str, ...]
    summary: str
    path: Path
    digest: str
    version: str = "0"
    description: str = ""
    inputs: Mapping[str, InputSpec] = {}
    variations: Mapping[str, VariationSpec] = {}
    deps: tuple[DepSpec, ...] = ()
    steps: tuple[StepSpec, ...] = ()
    outputs: Mapping[str, OutputSpec] = {}
    requires: Mapping[str, Any] = {}
    container: str | None = None
    cache: CachePolicy = CachePolicy()
    source: str = "core"
    resources: Resources = NO_RESOURCES
    """What one run asks a scheduler for (:mod:`cmx_core.recipes.resources`); executors read it."""
    retries: RetryPolicy | None = None
    """The recovery policy of every step of the recipe's node (docs/faults.md)."""

    def groups(self) -> dict[str, list[VariationSpec]]:
        """Variation groups with their members, in file order."""
        groups: dict[str, list[VariationSpec]] = {}
        for var in self.variations.values():
            if var.group:
                groups.setdefault(var.group, []).append(var)
        return groups


# ---------------------------------------------------------------------------------------
# Loading a file is cmx_core.recipes.load (YAML: cmx_core.recipes.yaml_lines, validation:
# cmx_core.recipes.check); this module is the model and its building only.


def split_tags(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


# ---------------------------------------------------------------------------------------
# Building the model from validated data


def recipe_from_data(data: Mapping[str, Any], path: Path, digest: str, source: str = "core") -> Recipe:
    """Build the frozen model from data that :func:`cmx_core.recipes.check.validate_recipe_data` accepted."""
    tags = data["tags"]
    return Recipe(
        name=data["name"],
        tags=tuple(split_tags(tags) if isinstance(tags, str) else tags),
        summary=data["summary"],
        path=path,
        digest=digest,
        version=str(data.get("version", "0")),
        description=data.get("description", ""),
        inputs={n: _input_from_data(n, s) for n, s in (data.get("inputs") or {}).items()},
        variations={n: _variation_from_data(n, s or {}) for n, s in (data.get("variations") or {}).items()},
        deps=_deps_from_data(data.get("deps") or [], "deps"),
        steps=tuple(_step_from_data(i, s) for i, s in enumerate(data.get("steps") or [])),
        outputs=_outputs_from_data(data.get("outputs") or {}),
        requires=dict(data.get("requires") or {}),
        container=data.get("container"),
        cache=_cache_from_data(data.get("cache", True)),
        source=source,
        resources=parse_resources(data["resources"]) if "resources" in data else NO_RESOURCES,
        retries=parse_policy(data["retries"]) if "retries" in data else None,
    )


def _input_from_data(name: str, spec: Mapping[str, Any]) -> InputSpec:
    return InputSpec(
        name=name,
        type=spec.get("type", "string"),
        default=spec.get("default"),
        min=spec.get("min"),
        max=spec.get("max"),
        choices=tuple(spec.get("choices") or ()),
        required=bool(spec.get("required", False)),
        description=spec.get("description", ""),
    )


def _variation_from_data(name: str, spec: Mapping[str, Any]) -> VariationSpec:
    return VariationSpec(
        name=name,
        group=spec.get("group"),
        default=bool(spec.get("default", False)),
        description=spec.get("description", ""),
        requires=dict(spec.get("requires") or {}),
        inputs=dict(spec.get("inputs") or {}),
        deps=_deps_from_data(spec.get("deps") or [], f"variations.{name}.deps"),
        container=spec.get("container"),
        **_variation_resources(spec.get("resources"), parametric=name.endswith(".#")),
    )


def _variation_resources(section: Any, parametric: bool) -> dict[str, Any]:
    """A variation's ``resources:`` split into the values it sets and, for a parametric one,
    the keys that take its value (``#``)."""
    keys = tuple(k for k, v in section.items() if v == "#") if parametric and isinstance(section, Mapping) else ()
    fixed = {k: v for k, v in section.items() if k not in keys} if isinstance(section, Mapping) else section
    return {"resources": parse_resources(fixed) if fixed else NO_RESOURCES, "value_keys": keys}


def _tag_tuple(tags: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(split_tags(tags) if isinstance(tags, str) else tags)


def _deps_from_data(deps: list[Mapping[str, Any]], origin: str) -> tuple[DepSpec, ...]:
    result = []
    for i, dep in enumerate(deps):
        tags = _tag_tuple(dep["tags"])
        result.append(
            DepSpec(
                index=i,
                tags=tags,
                alias=dep.get("as") or tags[0].replace("-", "_").replace(".", "_"),
                with_=dict(dep.get("with") or {}),
                when=dep.get("when"),
                version=str(dep["version"]) if "version" in dep else None,
                origin=origin,
                cached_alternatives=tuple(_tag_tuple(t) for t in dep.get("cached_alternatives") or ()),
            )
        )
    return tuple(result)


def _step_from_data(index: int, spec: Mapping[str, Any]) -> StepSpec:
    timeout = spec.get("timeout_s")
    return StepSpec(
        index=index,
        uses=spec["uses"],
        id=spec.get("id", f"step{index}"),
        with_=dict(spec.get("with") or {}),
        when=spec.get("when"),
        timeout_s=float(timeout) if timeout is not None else None,
        measures=bool(spec["measures"]) if "measures" in spec else None,
        retries=parse_policy(spec["retries"]) if "retries" in spec else None,
        checkpoint=parse_checkpoint(spec.get("checkpoint")),
    )


def _outputs_from_data(outputs: Any) -> dict[str, OutputSpec]:
    if isinstance(outputs, list):
        return {name: OutputSpec(name) for name in outputs}
    return {
        name: OutputSpec(name, (spec or {}).get("description", ""), (spec or {}).get("value"), (spec or {}).get("type"))
        for name, spec in outputs.items()
    }


def _cache_from_data(cache: Any) -> CachePolicy:
    if isinstance(cache, bool):
        return CachePolicy(enabled=cache)
    expires = cache.get("expires")
    expires_s = parse_duration(expires) if expires is not None else None
    return CachePolicy(enabled=bool(cache.get("enabled", True)), expires_s=expires_s,
                       measurements=bool(cache.get("measurements", False)))
