"""Plan-time check of a step's ``with:`` against its step type's ``params_schema``.

The literal structure must validate; a template string is typed by what it can render to:
text around ``{{ }}`` is a string, ``{{ inputs.n }}`` has the input's type, ``{{ node.dir }}``
is a string, and any other single expression (its type unknown until it runs) is accepted
wherever a value is allowed. Schemas using only the common keywords (the built-in steps'
do) are checked here without importing anything; any other schema is checked by
``jsonschema`` when the arguments hold no templates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cmx_core.datautil import iter_strings
from cmx_core.providers.types import StepType
from cmx_core.recipes.model import Recipe, StepSpec, line_of
from cmx_core.recipes.template import is_template
from cmx_core.recipes.template_checks import KeyPath, PlanCheckError, dotted
from cmx_core.recipes.template_refs import template_info

Schema = Mapping[str, Any]

_KEYWORDS = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "description", "title", "default", "examples", "$comment", "$schema", "format",
})
_INPUT_TYPES = {"string": "string", "path": "string", "number": "number", "integer": "integer", "boolean": "boolean"}
_NAMES = {"array": "a list", "object": "a mapping", "string": "a string", "number": "a number",
          "integer": "an integer", "boolean": "a boolean", "null": "null"}
_supported: dict[int, tuple[Schema, bool]] = {}


def check_step_params(recipe: Recipe, step: StepSpec, step_type: StepType) -> None:
    """Raise a one-line PlanCheckError when ``step.with_`` cannot match the step's schema."""
    schema = step_type.params_schema
    if not schema:
        return
    keypath: KeyPath = ("steps", step.index, "with")
    if _is_supported(schema):
        if _fast_check(schema)(step.with_, recipe):
            return
        problem = _Validator(recipe, step.uses).check(step.with_, schema, keypath)
    else:
        problem = _jsonschema_problem(step.with_, schema, keypath)
    if problem is not None:
        where, message = problem
        line = line_of(recipe.path, where)
        raise PlanCheckError(f"{recipe.path}{f':{line}' if line else ''}: {message}")


def _is_supported(schema: Schema) -> bool:
    cached = _supported.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _supported[id(schema)] = (schema, _subset(schema))
    return cached[1]


def _subset(schema: object) -> bool:
    if not isinstance(schema, Mapping) or not _KEYWORDS.issuperset(schema):
        return isinstance(schema, bool)
    nested = [*dict(schema.get("properties") or {}).values(), schema.get("items", True),
              schema.get("additionalProperties", True)]
    return all(_subset(s) for s in nested)


Problem = tuple[KeyPath, str]
Check = Callable[[object, Recipe], bool]
"""A compiled schema: True when the value surely passes (:class:`_Validator` then finds no
problem); False sends the value to the validator, which finds the problem and words it."""
_fast: dict[int, tuple[Schema, Check]] = {}


def _fast_check(schema: Schema) -> Check:
    """The schema compiled once per step type's schema, not walked again for every node."""
    cached = _fast.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _fast[id(schema)] = (schema, _compile(schema))
    return cached[1]


def _always(value: object, recipe: Recipe) -> bool:
    return True


def _never(value: object, recipe: Recipe) -> bool:
    return False


def _compile(schema: Schema | bool) -> Check:
    """The same tests as :meth:`_Validator.check`, in the same order, decided once."""
    if schema is True:
        return _always
    if schema is False or not isinstance(schema, Mapping):
        return _never
    wanted = schema.get("type")
    kinds = None if wanted is None else frozenset(
        k for k in ("string", "array", "object", "null", "boolean", "integer", "number") if _type_ok(k, wanted))
    allowed = list(schema["enum"]) if "enum" in schema else [schema["const"]] if "const" in schema else None
    by_kind = (_compile_string(schema), _compile_items(schema), _compile_number(schema), _compile_mapping(schema))
    strings, items, numbers, mappings = by_kind

    def check(value: object, recipe: Recipe) -> bool:
        cls = value.__class__
        if cls is str and ("{{" in value or "{%" in value):  # type: ignore[operator]
            kind = _template_type(str(value), recipe)
            return kind is None or wanted is None or _type_ok(kind, wanted)
        if kinds is not None and _json_type(value) not in kinds:
            return False
        if cls is str and allowed is None:
            return strings(value, recipe)
        if allowed is not None and not any(value == a and type(value) is type(a) for a in allowed):
            return False
        if isinstance(value, str):
            return strings(value, recipe)
        if isinstance(value, (list, tuple)):
            return items(value, recipe)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return numbers(value, recipe)
        return mappings(value, recipe) if isinstance(value, Mapping) else True

    return check


def _compile_string(schema: Schema) -> Check:
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
    low, high = schema.get("minLength"), schema.get("maxLength")

    if pattern is None and low is None and high is None:
        return _always

    def check(value: object, recipe: Recipe) -> bool:
        text = str(value)
        return (pattern is None or pattern.search(text) is not None) and _within(len(text), low, high)

    return check


def _compile_items(schema: Schema) -> Check:
    low, high = schema.get("minItems"), schema.get("maxItems")
    each = _compile(schema["items"]) if "items" in schema else _always

    def check(value: object, recipe: Recipe) -> bool:
        seq: Sequence[object] = value  # type: ignore[assignment]
        if not _within(len(seq), low, high):
            return False
        for item in seq:  # noqa: SIM110  (a loop: all() over a generator costs more per node)
            if not each(item, recipe):
                return False
        return True

    return check


def _compile_number(schema: Schema) -> Check:
    bounds = [(test, float(schema[word])) for word, test, _sign in _BOUNDS if word in schema]

    def check(value: object, recipe: Recipe) -> bool:
        number = float(value)  # type: ignore[arg-type]
        return all(test(number, bound) for test, bound in bounds)

    return check


def _compile_mapping(schema: Schema) -> Check:
    properties = {name: _compile(sub) for name, sub in dict(schema.get("properties") or {}).items()}
    extra = _compile(schema.get("additionalProperties", True))
    required = tuple(schema.get("required") or ())

    def check(value: object, recipe: Recipe) -> bool:
        given: Mapping[str, object] = value  # type: ignore[assignment]
        for name in required:
            if name not in given:
                return False
        for name, item in given.items():  # noqa: SIM110  (as above)
            if not properties.get(name, extra)(item, recipe):
                return False
        return True

    return check


def _within(size: int, low: Any, high: Any) -> bool:
    return (low is None or size >= low) and (high is None or size <= high)


class _Validator:
    """The common JSON Schema keywords, with messages that say what to write instead."""

    def __init__(self, recipe: Recipe, uses: str) -> None:
        self.recipe = recipe
        self.uses = uses
        self.about = ""  # the description of the nearest enclosing schema that has one

    def check(self, value: object, schema: Schema | bool, keypath: KeyPath) -> Problem | None:
        if schema is True:
            return None
        if schema is False:
            return keypath, f"{dotted(keypath)} is not allowed by step type '{self.uses}'"
        if value.__class__ is str and ("{{" in value or "{%" in value):
            return self._template(str(value), schema, keypath)
        if "type" in schema and not _type_ok(_json_type(value), schema["type"]):
            return self._type(value, schema, keypath)
        if "enum" in schema or "const" in schema:
            problem = self._enum(value, schema, keypath)
            if problem:
                return problem
        if isinstance(value, str):
            return self._string(value, schema, keypath)
        if isinstance(value, (list, tuple)):
            sized = _size(keypath, len(value), schema, "minItems", "maxItems", "item")
            return sized or self._items(value, schema, keypath)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self._number(value, schema, keypath)
        return self._mapping(value, schema, keypath) if isinstance(value, Mapping) else None

    def _template(self, text: str, schema: Schema, keypath: KeyPath) -> Problem | None:
        kind = _template_type(text, self.recipe)
        if kind is None or "type" not in schema or _type_ok(kind, schema["type"]):
            return None
        return keypath, (f"{dotted(keypath)} must be {_expected(schema)}, but {text!r} renders {_NAMES[kind]}" \
                        f"{self._about(schema)}")

    def _type(self, value: object, schema: Schema, keypath: KeyPath) -> Problem:
        return keypath, (f"{dotted(keypath)} must be {_expected(schema)}, not {_shown(value)}" \
                        f"{self._about(schema)}{_hint(value, schema, keypath)}")

    def _enum(self, value: object, schema: Schema, keypath: KeyPath) -> Problem | None:
        allowed = list(schema["enum"]) if "enum" in schema else [schema["const"]] if "const" in schema else None
        if allowed is None or any(value == a and type(value) is type(a) for a in allowed):
            return None

        close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return keypath, (f"{dotted(keypath)} must be one of: {', '.join(map(str, allowed))}, not {value!r}" \
                        f"{self._about(schema)}{hint}")

    def _string(self, value: str, schema: Schema, keypath: KeyPath) -> Problem | None:
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            wanted = schema.get("description") or f"the pattern {schema['pattern']}"
            return keypath, f"{dotted(keypath)} = {value!r} is not {wanted} (step type '{self.uses}')"
        return _size(keypath, len(value), schema, "minLength", "maxLength", "character")

    def _number(self, value: float, schema: Schema, keypath: KeyPath) -> Problem | None:
        for word, test, sign in _BOUNDS:
            if word in schema and not test(float(value), float(schema[word])):
                return keypath, f"{dotted(keypath)} = {value} must be {sign} {schema[word]}{self._about(schema)}"
        return None

    def _items(self, value: list[object] | tuple[object, ...], schema: Schema, keypath: KeyPath) -> Problem | None:
        if "items" not in schema:
            return None
        outer, self.about = self.about, schema.get("description") or self.about
        try:
            for i, item in enumerate(value):
                problem = self.check(item, schema["items"], (*keypath, i))
                if problem:
                    return problem
        finally:
            self.about = outer
        return None

    def _mapping(self, value: Mapping[str, object], schema: Schema, keypath: KeyPath) -> Problem | None:
        properties: Mapping[str, Schema] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                about = properties.get(name, {}).get("description")
                return keypath, (f"{dotted(keypath)} needs '{name}' (step type '{self.uses}'" \
                                f"{': ' + name + ' is ' + about if about else ''}); add {name}: to the step's with:")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            sub: Schema | bool = properties.get(name, extra)
            if sub is False:
                known = ", ".join(sorted(properties)) or "none"
                return (*keypath, name), (f"{dotted((*keypath, name))}: unknown parameter of step type " \
                                         f"'{self.uses}' (expected one of: {known})")
            problem = self.check(item, sub, (*keypath, name))
            if problem:
                return problem
        return None

    def _about(self, schema: Schema) -> str:
        about = schema.get("description") or self.about
        return f" ({self.uses} step: {about})" if about else f" ({self.uses} step schema)"


_BOUNDS = (("minimum", float.__ge__, ">="), ("maximum", float.__le__, "<="),
           ("exclusiveMinimum", float.__gt__, ">"), ("exclusiveMaximum", float.__lt__, "<"))


def _size(keypath: KeyPath, size: int, schema: Schema, low: str, high: str, unit: str) -> Problem | None:
    if low in schema and size < schema[low]:
        return keypath, f"{dotted(keypath)} needs at least {schema[low]} {unit}{'s' if schema[low] != 1 else ''}"
    if high in schema and size > schema[high]:
        return keypath, f"{dotted(keypath)} allows at most {schema[high]} {unit}{'s' if schema[high] != 1 else ''}"
    return None


def _template_type(text: str, recipe: Recipe) -> str | None:
    """The JSON type ``text`` renders to, or None when only the run can tell."""
    info = template_info(text)
    if not info.native:
        return "string"
    chain = info.chain
    if chain is None or len(chain) != 2:
        return None
    if chain[0] in ("node", "run"):
        return "string"
    spec = recipe.inputs.get(str(chain[1])) if chain[0] == "inputs" else None
    if spec is None:
        return None
    if spec.type == "choice":
        kinds = {_json_type(c) for c in spec.choices}
        return kinds.pop() if len(kinds) == 1 else None
    return _INPUT_TYPES.get(spec.type)


def _json_type(value: object) -> str:
    cls = value.__class__
    if cls is str:
        return "string"
    if cls is list:
        return "array"
    if cls is dict:
        return "object"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _type_ok(kind: str, wanted: str | Sequence[str]) -> bool:
    if kind == wanted or (kind == "integer" and wanted == "number"):
        return True
    return not isinstance(wanted, str) and (kind in wanted or (kind == "integer" and "number" in wanted))


def _expected(schema: Schema) -> str:
    wanted = schema["type"]
    names = [_NAMES.get(w, w) for w in ([wanted] if isinstance(wanted, str) else wanted)]
    return " or ".join(names)


def _shown(value: object) -> str:
    kind = _json_type(value)
    name = _NAMES.get(kind, kind)
    return f"{name} ({value!r})" if kind in ("boolean", "null", "integer", "number") else name


def _hint(value: object, schema: Schema, keypath: KeyPath) -> str:
    wanted = schema["type"]
    allowed = [wanted] if isinstance(wanted, str) else list(wanted)
    if isinstance(value, str) and "array" in allowed:
        if any(c in value for c in ";|&<>$`*\"'\\"):
            return (f"; write {keypath[-1]} as a list of arguments "
                    "(no shell runs it: for shell syntax use [sh, -c, '...'])")
        if 0 < len(value) <= 60:
            return f"; write {keypath[-1]}: [{', '.join(value.split())}]"
        return f"; write {keypath[-1]} as a YAML list of arguments"
    if isinstance(value, bool) and "string" in allowed:
        return f"; quote it: '{str(value).lower()}'"
    if isinstance(value, Mapping) and isinstance(keypath[-1], int) and "string" in allowed:
        return "; quote the element: inside [ ], 'a: b' is a mapping"
    return ""


def _jsonschema_problem(value: Mapping[str, object], schema: Schema, keypath: KeyPath) -> Problem | None:
    """A schema beyond the common keywords: ``jsonschema`` decides, when nothing is a template."""
    if any(is_template(text) for text in iter_strings(value)):
        return None
    validator = _compiled(schema)
    error = next(iter(sorted(validator.iter_errors(dict(value)), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    where: KeyPath = (*keypath, *error.absolute_path)
    return where, f"{dotted(where)}: {error.message}"


_validators: dict[int, tuple[Schema, Any]] = {}


def _compiled(schema: Schema) -> Any:
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:
        import jsonschema  # deferred: jsonschema only when this runs (84 modules)

        cls = jsonschema.validators.validator_for(schema)
        cached = _validators[id(schema)] = (schema, cls(schema))
    return cached[1]
