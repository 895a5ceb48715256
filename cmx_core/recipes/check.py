"""Validation of plain recipe data (what YAML gave) with file:line:key errors; run once,
when the catalog indexes a changed file."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from cmx_core.errors import RecipeError, UsageError
from cmx_core.recipes.expr import ExpressionError, compile_expression
from cmx_core.recipes.model import (
    DEP_KEYS,
    INPUT_KEYS,
    INPUT_NAME_RE,
    INPUT_TYPES,
    NAME_RE,
    OUTPUT_KEYS,
    STEP_KEYS,
    TAG_RE,
    TOP_KEYS,
    VARIATION_KEYS,
    VARIATION_RE,
    _input_from_data,
    parse_duration,
    split_tags,
)
from cmx_core.recipes.resources import ResourceError, parse_resources
from cmx_core.recipes.retries import PolicyError, parse_checkpoint, parse_policy
from cmx_core.recipes.yaml_lines import WrittenAsNumber
from cmx_core.recipes.yaml_lines import fail_at as _fail


class _Checker:
    """Validates recipe data, raising the first error with its location."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scope: _Scope | None = None  # what `when:` may name; set once inputs are checked

    def fail(self, keypath: tuple[str | int, ...], message: str) -> RecipeError:
        return _fail(self.path, keypath, message)

    def mapping(self, value: Any, keypath: tuple[str | int, ...], allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(keypath, f"expected a mapping, got {_kind(value)}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    known = ", ".join(sorted(allowed))
                    raise self.fail((*keypath, key), f"unknown key '{key}' (expected one of: {known})")
        return value

    def string(self, value: Any, keypath: tuple[str | int, ...], pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(keypath, f"expected a non-empty string, got {_kind(value)}")
        if pattern and not pattern.match(value):
            raise self.fail(keypath, f"'{value}' does not match {pattern.pattern}")
        return value

    def one_line(self, value: str, keypath: tuple[str | int, ...]) -> str:
        """A single-line field (a summary is a table cell, a container a name) written over
        several lines (``summary: |``) is refused rather than printed broken."""
        if "\n" in value.strip() or "\r" in value:
            raise self.fail(keypath, "expected one line of text, got several; put longer text in 'description'")
        return value

    def tags(self, value: Any, keypath: tuple[str | int, ...]) -> list[str]:
        items = split_tags(value) if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise self.fail(keypath, "expected a non-empty list of tags")
        seen: set[str] = set()
        for i, tag in enumerate(items):
            if isinstance(tag, WrittenAsNumber):
                raise self.fail((*keypath, i), f"tag {tag} is written as a number; quote it ('{tag}') to mean "
                                               "the text, or use a word")
            self.string(tag, (*keypath, i), TAG_RE)
            if tag in seen:
                raise self.fail((*keypath, i), f"tag '{tag}' is listed twice")
            seen.add(tag)
        return items

    def number(self, value: Any, keypath: tuple[str | int, ...]) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(keypath, f"expected a number, got {_kind(value)}")
        return value

    def boolean(self, value: Any, keypath: tuple[str | int, ...]) -> bool:
        if not isinstance(value, bool):
            raise self.fail(keypath, f"expected true or false, got {_kind(value)}")
        return value


class _Scope(NamedTuple):
    """The names a recipe's ``when:`` conditions may read under ``inputs`` and ``variation``."""

    inputs: Mapping[str, Any]
    variations: Mapping[str, Any]

    def groups(self) -> set[str]:
        return {spec["group"] for spec in self.variations.values() if isinstance(spec, dict) and spec.get("group")}


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def validate_recipe_data(data: Any, path: Path) -> None:
    """Check recipe data against the format; raise a RecipeError naming file:line:key."""
    c = _Checker(path)
    if data is None:
        raise c.fail((), "the file is empty; a recipe needs at least name, tags and summary")
    c.mapping(data, (), TOP_KEYS)
    for key in ("name", "tags", "summary"):
        if key not in data:
            raise c.fail((), f"missing required key '{key}'")
    c.string(data["name"], ("name",), NAME_RE)
    c.tags(data["tags"], ("tags",))
    c.one_line(c.string(data["summary"], ("summary",)), ("summary",))
    for key in ("version", "description", "container"):
        if key in data:
            c.string(str(data[key]) if key == "version" and isinstance(data[key], (int, float)) else data[key], (key,))
    if "container" in data:
        c.one_line(data["container"], ("container",))
    if "version" in data:
        if isinstance(data["version"], WrittenAsNumber):
            raise c.fail(("version",), f"version {data['version']} is written as a number (YAML reads "
                                       f"{float(data['version'])!r}); quote it: version: '{data['version']}'")
        _check_version(c, data["version"])
    _check_inputs(c, data.get("inputs", {}))
    _check_variations(c, data.get("variations", {}), data.get("inputs") or {})
    c.scope = _Scope(data.get("inputs") or {}, data.get("variations") or {})
    _check_deps(c, data.get("deps", []), ("deps",))
    for name, spec in (data.get("variations") or {}).items():
        _check_deps(c, (spec or {}).get("deps", []), ("variations", name, "deps"))
    _check_steps(c, data.get("steps", []))
    _check_outputs(c, data.get("outputs", {}))
    c.mapping(data.get("requires", {}), ("requires",))
    _check_cache(c, data.get("cache", True))
    _check_resources(c, data.get("resources"), ("resources",))
    _check_policy(c, data, ())


def _check_inputs(c: _Checker, inputs: Any) -> None:
    c.mapping(inputs, ("inputs",))
    for name, spec in inputs.items():
        kp = ("inputs", name)
        c.string(name, kp)
        if not INPUT_NAME_RE.match(name):
            raise c.fail(kp, f"input name '{name}' must match {INPUT_NAME_RE.pattern} "
                             f"(lowercase, digits and '_'; the CLI option --{name.replace('_', '-')} "
                             f"is given to the input {name.replace('-', '_')!r})")
        c.mapping(spec, kp, INPUT_KEYS)
        kind = spec.get("type", "string")
        if kind not in INPUT_TYPES:
            raise c.fail((*kp, "type"), f"unknown input type '{kind}' (expected one of: {', '.join(INPUT_TYPES)})")
        for bound in ("min", "max"):
            if bound in spec:
                c.number(spec[bound], (*kp, bound))
        if kind == "choice":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise c.fail((*kp, "choices"), "a choice input needs a non-empty list 'choices'")
        elif "choices" in spec:
            raise c.fail((*kp, "choices"), "'choices' is only allowed with type: choice")
        if "required" in spec:
            c.boolean(spec["required"], (*kp, "required"))
        if spec.get("default") is not None:
            try:
                _input_from_data(name, spec).coerce(spec["default"], "default")
            except UsageError as exc:
                raise c.fail((*kp, "default"), str(exc).split(": ", 1)[1]) from None


def _check_variations(c: _Checker, variations: Any, inputs: Mapping[str, Any]) -> None:
    c.mapping(variations, ("variations",))
    defaults: dict[str, str] = {}
    for name, spec in variations.items():
        kp = ("variations", name)
        c.string(name, kp, VARIATION_RE)
        spec = {} if spec is None else spec
        c.mapping(spec, kp, VARIATION_KEYS)
        if "group" in spec:
            c.string(spec["group"], (*kp, "group"), NAME_RE)
        if spec.get("default"):
            c.boolean(spec["default"], (*kp, "default"))
            group = spec.get("group") or ""
            if group and group in defaults:
                raise c.fail((*kp, "default"), f"group '{group}' already has default '{defaults[group]}'")
            defaults[group] = name
        c.mapping(spec.get("requires", {}), (*kp, "requires"))
        c.mapping(spec.get("inputs", {}), (*kp, "inputs"))
        for key, value in spec.get("inputs", {}).items():
            if key not in inputs:
                raise c.fail((*kp, "inputs", key), f"variation sets input '{key}', which the recipe does not declare")
            if value == "#" and not name.endswith(".#"):
                raise c.fail((*kp, "inputs", key), f"'#' is the value of a parametric variation, but '{name}' "
                                                   f"has no '.#'; name it '{name}.#' (selected as {name}.VALUE)")
        if "container" in spec:
            c.string(spec["container"], (*kp, "container"))
        _check_resources(c, spec.get("resources"), (*kp, "resources"), parametric=name.endswith(".#"))


def _check_deps(c: _Checker, deps: Any, kp: tuple[str | int, ...]) -> None:
    if not isinstance(deps, list):
        raise c.fail(kp, f"expected a list of deps, got {_kind(deps)}")
    for i, dep in enumerate(deps):
        dkp = (*kp, i)
        c.mapping(dep, dkp, DEP_KEYS)
        if "tags" not in dep:
            raise c.fail(dkp, "a dep needs 'tags'")
        c.tags(dep["tags"], (*dkp, "tags"))
        if "as" in dep:
            c.string(dep["as"], (*dkp, "as"), re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$"))
        c.mapping(dep.get("with", {}), (*dkp, "with"))
        _check_templates(c, dep.get("with", {}), (*dkp, "with"))
        if "when" in dep:
            _check_expr(c, dep["when"], (*dkp, "when"))
        if "version" in dep:
            _check_specifier(c, dep["version"], (*dkp, "version"))
        if "cached_alternatives" in dep:
            _check_alternatives(c, dep["cached_alternatives"], (*dkp, "cached_alternatives"))


def _check_alternatives(c: _Checker, alternatives: Any, kp: tuple[str | int, ...]) -> None:
    if not isinstance(alternatives, list) or not alternatives:
        raise c.fail(kp, f"expected a non-empty list of tag lists (e.g. [[get, gcc]]), got {_kind(alternatives)}")
    for i, tags in enumerate(alternatives):
        c.tags(tags, (*kp, i))


def _check_steps(c: _Checker, steps: Any) -> None:
    if not isinstance(steps, list):
        raise c.fail(("steps",), f"expected a list of steps, got {_kind(steps)}")
    ids: set[str] = set()
    for i, step in enumerate(steps):
        kp = ("steps", i)
        c.mapping(step, kp, STEP_KEYS)
        if "uses" not in step:
            raise c.fail(kp, "a step needs 'uses' (the step type)")
        c.string(step["uses"], (*kp, "uses"))
        step_id = step.get("id", f"step{i}")
        c.string(step_id, (*kp, "id"), re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$"))
        if step_id in ids:
            raise c.fail((*kp, "id"), f"duplicate step id '{step_id}'")
        ids.add(step_id)
        c.mapping(step.get("with", {}), (*kp, "with"))
        _check_templates(c, step.get("with", {}), (*kp, "with"))
        if "when" in step:
            _check_expr(c, step["when"], (*kp, "when"))
        if "timeout_s" in step and c.number(step["timeout_s"], (*kp, "timeout_s")) <= 0:
            raise c.fail((*kp, "timeout_s"), f"must be a positive number of seconds, got {step['timeout_s']}")
        if "measures" in step:
            c.boolean(step["measures"], (*kp, "measures"))
        _check_policy(c, step, kp)


def _check_outputs(c: _Checker, outputs: Any) -> None:
    if isinstance(outputs, list):
        for i, name in enumerate(outputs):
            c.string(name, ("outputs", i))
        return
    c.mapping(outputs, ("outputs",))
    for name, spec in outputs.items():
        c.mapping({} if spec is None else spec, ("outputs", name), OUTPUT_KEYS)
        if spec and "value" in spec:
            _check_templates(c, spec["value"], ("outputs", name, "value"))


def _check_cache(c: _Checker, cache: Any) -> None:
    if isinstance(cache, bool):
        return
    c.mapping(cache, ("cache",), {"expires", "enabled", "measurements"})
    for key in ("enabled", "measurements"):
        if key in cache:
            c.boolean(cache[key], ("cache", key))
    if "expires" in cache and parse_duration(cache["expires"]) is None:
        raise c.fail(("cache", "expires"), f"expected a duration like 30s, 10m, 12h or 1d, got {cache['expires']!r}")


def _check_resources(c: _Checker, section: Any, kp: tuple[str | int, ...], parametric: bool = False) -> None:
    """``resources:`` (of the recipe or a variation): see :mod:`cmx_core.recipes.resources`. A
    parametric variation's counts may be ``#`` (its value), checked as 1 here."""
    if section is None:
        return
    if isinstance(section, dict) and "#" in section.values():
        if not parametric:
            key = next(k for k, v in section.items() if v == "#")
            raise c.fail((*kp, key), "'#' is the value of a parametric variation; name the variation 'NAME.#'")
        section = {k: 1 if v == "#" else v for k, v in section.items()}
    try:
        parse_resources(section)
    except ResourceError as exc:
        raise c.fail((*kp, exc.key) if exc.key else kp, exc.message) from None


def _check_policy(c: _Checker, holder: dict[str, Any], kp: tuple[str | int, ...]) -> None:
    """``retries:`` (recipe or step) and ``checkpoint:`` (step): :mod:`cmx_core.recipes.retries`."""
    for key, parse in (("retries", parse_policy), ("checkpoint", parse_checkpoint)):
        if key not in holder:
            continue
        try:
            parse(holder[key])
        except PolicyError as exc:
            raise c.fail((*kp, key, exc.key) if exc.key else (*kp, key), exc.message) from None


def _check_expr(c: _Checker, text: Any, kp: tuple[str | int, ...]) -> None:
    c.string(text, kp)
    try:
        expression = compile_expression(text)
    except ExpressionError as exc:
        raise c.fail(kp, f"invalid condition {text!r}: {exc}") from None
    if c.scope is not None:
        _check_expr_names(c, expression, kp)


def _check_expr_names(c: _Checker, expression: Any, kp: tuple[str | int, ...]) -> None:
    """``inputs.X`` must be a declared input and ``variation.G`` a declared group: a typo
    would otherwise read a missing value and silently make the condition false."""
    assert c.scope is not None
    for root, name in expression.references():
        if root == "inputs" and name not in c.scope.inputs:
            known = ", ".join(sorted(c.scope.inputs)) or "none"
            raise c.fail(kp, f"condition reads inputs.{name}, which the recipe does not declare (inputs: {known})")
        if root == "variation" and name not in c.scope.groups():
            known = ", ".join(sorted(c.scope.groups())) or "none"
            raise c.fail(kp, f"condition reads variation.{name}, which is not a variation group of the recipe "
                             f"(groups: {known}; an ungrouped variation is tested with 'NAME' in variations)")


def _check_templates(c: _Checker, value: Any, kp: tuple[str | int, ...]) -> None:
    """Report Jinja2 syntax errors at load time rather than when the step runs."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_templates(c, item, (*kp, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_templates(c, item, (*kp, i))
    elif isinstance(value, str) and ("{{" in value or "{%" in value) and _needs_parse(value):
        problem = _template_syntax_error(value)
        if problem:
            raise c.fail(kp, f"invalid template {value!r}: {problem}")


# ``{{ name.attr.attr }}``, the common shape, is valid Jinja2 by construction; only other
# templates pay for a parse (about 35 us each).
_SIMPLE_TEMPLATE = re.compile(r"(?<!\{)\{\{ *([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*) *\}\}")
_JINJA_OPERATORS = frozenset({"and", "or", "not", "in", "is", "if", "else"})


def _needs_parse(text: str) -> bool:
    for match in _SIMPLE_TEMPLATE.finditer(text):
        if not _JINJA_OPERATORS.isdisjoint(match.group(1).split(".")):
            return True
    rest = _SIMPLE_TEMPLATE.sub("\x00", text)
    return "{{" in rest or "{%" in rest or "{#" in rest


@lru_cache(maxsize=4096)
def _template_syntax_error(text: str) -> str | None:
    """The Jinja2 syntax error of ``text``, or None (cached: recipes share many templates)."""
    import jinja2  # deferred: jinja2 only when this runs (46 modules)

    try:
        _jinja_parser().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        return exc.message or str(exc)
    return None


@lru_cache(maxsize=1)
def _jinja_parser() -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # deferred: jinja2 only when this runs (47 modules)

    return ImmutableSandboxedEnvironment()


def _check_version(c: _Checker, value: Any) -> None:
    from packaging.version import InvalidVersion, Version  # deferred: a scan-cached recipe is not checked

    try:
        Version(str(value))
    except InvalidVersion:
        raise c.fail(("version",), f"invalid version {str(value)!r} "
                                   "(expected a PEP 440 version such as 1.2.0)") from None


def _check_specifier(c: _Checker, text: Any, kp: tuple[str | int, ...]) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # deferred: as in _check_version

    try:
        SpecifierSet(str(text))
    except InvalidSpecifier:
        raise c.fail(kp, f"invalid version range {text!r} (expected e.g. '>=1.2,<2')") from None
