"""The recipe model: typed, immutable (NamedTuples: cheap to define and to build by the
thousand), validated with file:line:key errors.

Loading is two-phase for speed: :func:`validate_recipe_data` checks plain YAML data once
(when the catalog indexes a changed file) and :func:`recipe_from_data` builds the frozen
model from already-validated data without re-checking. Line numbers are looked up only when
an error is reported (:func:`line_of`), so the happy path never composes YAML nodes.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from cmx_core.errors import Location, RecipeError, UsageError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
VARIATION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_+-]*(\.#)?$")
INPUT_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")  # --foo-bar reaches foo_bar, never foo-bar
INPUT_TYPES = ("string", "number", "integer", "boolean", "choice", "path")
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

TOP_KEYS = {
    "name", "version", "tags", "summary", "description", "inputs", "variations", "deps",
    "steps", "outputs", "requires", "container", "cache",
}
INPUT_KEYS = {"type", "default", "min", "max", "choices", "required", "description"}
VARIATION_KEYS = {"group", "default", "description", "requires", "inputs", "deps", "container"}
DEP_KEYS = {"tags", "as", "with", "when", "version"}
STEP_KEYS = {"uses", "id", "with", "when", "timeout_s"}
OUTPUT_KEYS = {"description", "value", "type"}

#: Input names that ``cmx run``/``cmx plan`` take as cmx's own options (``--output`` is the
#: run directory): such an input is legal but must be given as ``--input.NAME=VALUE``.
CLI_RESERVED_INPUTS = frozenset({
    "output", "facts", "tags", "lock", "jobs", "executor", "container", "recipes", "json",
    "refresh", "no_cache", "strict_plugins", "verbose", "executor_opt", "input", "help",
    "allow_drift",
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
            raise UsageError(f"{origin}: input '{self.name}' = {value!r} is not one of: {allowed}")


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
            return int(number) if isinstance(value, int) else number
        if kind == "boolean":
            return _to_bool(value)
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

    index: int
    tags: tuple[str, ...]
    alias: str
    with_: Mapping[str, Any] = {}  # noqa: RUF012 - read-only by convention
    when: str | None = None
    version: str | None = None
    origin: str = "deps"  # the key path, e.g. "deps" or "variations.cuda.deps"


class VariationSpec(NamedTuple):
    """A variation: grouped members are exclusive; ``parametric`` ones carry a value."""

    name: str
    group: str | None = None
    default: bool = False
    description: str = ""
    requires: Mapping[str, Any] = {}  # noqa: RUF012
    inputs: Mapping[str, Any] = {}  # noqa: RUF012
    deps: tuple[DepSpec, ...] = ()
    container: str | None = None

    @property
    def parametric(self) -> bool:
        return self.name.endswith(".#")

    @property
    def stem(self) -> str:
        """``batch_size`` for ``batch_size.#``."""
        return self.name[:-2] if self.parametric else self.name


class StepSpec(NamedTuple):
    """One step: a step type and its (template) parameters."""

    index: int
    uses: str
    id: str
    with_: Mapping[str, Any] = {}  # noqa: RUF012 - read-only by convention
    when: str | None = None
    timeout_s: float | None = None


class OutputSpec(NamedTuple):
    name: str
    description: str = ""
    value: str | None = None
    type: str | None = None


class CachePolicy(NamedTuple):
    enabled: bool = True
    expires_s: float | None = None


class Recipe(NamedTuple):
    """A validated recipe. ``digest`` is the sha256 of the file's bytes."""

    name: str
    tags: tuple[str, ...]
    summary: str
    path: Path
    digest: str
    version: str = "0"
    description: str = ""
    inputs: Mapping[str, InputSpec] = {}  # noqa: RUF012
    variations: Mapping[str, VariationSpec] = {}  # noqa: RUF012
    deps: tuple[DepSpec, ...] = ()
    steps: tuple[StepSpec, ...] = ()
    outputs: Mapping[str, OutputSpec] = {}  # noqa: RUF012
    requires: Mapping[str, Any] = {}  # noqa: RUF012
    container: str | None = None
    cache: CachePolicy = CachePolicy()
    source: str = "core"

    def groups(self) -> dict[str, list[VariationSpec]]:
        """Variation groups with their members, in file order."""
        groups: dict[str, list[VariationSpec]] = {}
        for var in self.variations.values():
            if var.group:
                groups.setdefault(var.group, []).append(var)
        return groups


# ---------------------------------------------------------------------------------------
# Loading


def yaml_loader() -> Any:
    """libyaml's C loader when present (10x faster), else the pure-Python one."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_recipe_file(path: Path, source: str = "core") -> Recipe:
    """Read, validate and build one recipe file; errors name file, line and key."""
    raw = path.read_bytes()
    data = parse_yaml(raw, path)
    validate_recipe_data(data, path)
    return recipe_from_data(data, path, digest_of(raw), source)


def digest_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def parse_yaml(raw: bytes, path: Path) -> Any:
    """Parse one YAML document, refusing duplicate mapping keys (YAML would silently keep
    the last one). This is ``yaml.load`` split in two: the (C) composer builds the node
    tree once, the keys are checked on it, then the same tree is constructed."""
    import yaml

    loader = yaml_loader()(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicate_keys(node, path)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or exc.context or "invalid YAML"
        raise RecipeError(Location(str(path), line), f"malformed YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(Location(str(path)), f"malformed YAML: {exc}") from None
    finally:
        loader.dispose()


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _check_duplicate_keys(root: Any, path: Path) -> None:
    """Raise a RecipeError for the first mapping that has the same scalar key twice. The
    common case (no duplicates) is one cheap pass; key paths are worked out only on error."""
    import yaml

    mapping_node, scalar_node = yaml.MappingNode, yaml.ScalarNode
    stack = [root]
    visited: set[int] = set()  # aliases share nodes: visit each once (no alias blow-up)
    shared = False
    while stack:
        node = stack.pop()
        if node.__class__ is scalar_node:
            continue
        if id(node) in visited:
            shared = True
            continue
        visited.add(id(node))
        value = node.value
        if node.__class__ is mapping_node:
            try:
                distinct = len({(k.tag, k.value) for k, _ in value})
            except TypeError:  # a non-scalar key (unhashable value): check one by one
                distinct = -1
            if distinct != len(value):
                _raise_duplicate(value, _keypath_to(root, node), path)
            stack.extend([v for _, v in value])
        else:
            stack.extend(value)
    if shared:
        _check_not_recursive(root, path)


def _check_not_recursive(root: Any, path: Path) -> None:
    """Refuse an alias inside the node it refers to (``a: &x {b: *x}``): the data would be
    infinitely deep. Only run when some node is shared, i.e. when the file uses aliases."""
    import yaml

    collections = (yaml.MappingNode, yaml.SequenceNode)
    done: set[int] = set()
    on_path: set[int] = {id(root)}
    stack = [(root, iter(_children(root)))]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
        elif isinstance(child, collections) and id(child) not in done:
            if id(child) in on_path:
                raise RecipeError(
                    Location(str(path), child.start_mark.line + 1, ".".join(map(str, _keypath_to(root, child)))),
                    "a YAML alias refers to a node that contains it (recursive data); recipes must be plain trees",
                )
            on_path.add(id(child))
            stack.append((child, iter(_children(child))))


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [v for _, v in node.value]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _keypath_to(root: Any, target: Any) -> tuple[str | int, ...]:
    """The key path from ``root`` to the node ``target`` (for an error message)."""
    import yaml

    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    visited: set[int] = set()
    while stack:
        node, keypath = stack.pop()
        if node is target:
            return keypath
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):  # reversed: the first path in file order wins
            stack.extend(reversed([(v, (*keypath, str(k.value))) for k, v in node.value]))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed([(v, (*keypath, i)) for i, v in enumerate(node.value)]))
    return ()


def _raise_duplicate(pairs: list[tuple[Any, Any]], keypath: tuple[str | int, ...], path: Path) -> None:
    import yaml

    first: dict[tuple[str, str], int] = {}
    for knode, _ in pairs:
        if not isinstance(knode, yaml.ScalarNode) or knode.tag == _MERGE_TAG:
            continue
        line = knode.start_mark.line + 1
        key = (knode.tag, knode.value)
        if key in first:
            dotted = ".".join(str(k) for k in (*keypath, knode.value))
            raise RecipeError(
                Location(str(path), line, dotted),
                f"duplicate key '{knode.value}' (first defined on line {first[key]}); remove one of them",
            )
        first[key] = line


def line_of(path: Path, keypath: tuple[str | int, ...]) -> int:
    """The 1-based line of ``keypath`` in the YAML file (0 if it cannot be found)."""
    import yaml

    try:
        node = yaml.compose(path.read_bytes(), Loader=yaml_loader())
    except (OSError, yaml.YAMLError):
        return 0
    line = node.start_mark.line + 1 if node is not None else 0
    for key in keypath:
        child = _child_node(node, key)
        if child is None:
            break
        node, line = child
    return line


def _child_node(node: Any, key: str | int) -> tuple[Any, int] | None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            if knode.value == str(key):
                return vnode, knode.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        child = node.value[key]
        return child, child.start_mark.line + 1
    return None


def dotted_key(keypath: tuple[str | int, ...]) -> str:
    """``steps.0.with.cmd[2]``: list indices in brackets, except a step's or a dep's number."""
    text = ""
    for i, part in enumerate(keypath):
        numbered = i > 0 and keypath[i - 1] in ("steps", "deps")
        text += f"[{part}]" if isinstance(part, int) and not numbered else (f".{part}" if text else str(part))
    return text


def _fail(path: Path, keypath: tuple[str | int, ...], message: str) -> RecipeError:
    return RecipeError(Location(str(path), line_of(path, keypath), dotted_key(keypath)), message)


# ---------------------------------------------------------------------------------------
# Validation of plain data


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

    def tags(self, value: Any, keypath: tuple[str | int, ...]) -> list[str]:
        items = split_tags(value) if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise self.fail(keypath, "expected a non-empty list of tags")
        for i, tag in enumerate(items):
            self.string(tag, (*keypath, i), TAG_RE)
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


def split_tags(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


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
    c.string(data["summary"], ("summary",))
    for key in ("version", "description", "container"):
        if key in data:
            c.string(str(data[key]) if key == "version" and isinstance(data[key], (int, float)) else data[key], (key,))
    if "version" in data:
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
        for key in spec.get("inputs", {}):
            if key not in inputs:
                raise c.fail((*kp, "inputs", key), f"variation sets input '{key}', which the recipe does not declare")
        if "container" in spec:
            c.string(spec["container"], (*kp, "container"))


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
        if "timeout_s" in step:
            c.number(step["timeout_s"], (*kp, "timeout_s"))


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
    c.mapping(cache, ("cache",), {"expires", "enabled"})
    if "enabled" in cache:
        c.boolean(cache["enabled"], ("cache", "enabled"))
    if "expires" in cache and parse_duration(cache["expires"]) is None:
        raise c.fail(("cache", "expires"), f"expected a duration like 30s, 10m, 12h or 1d, got {cache['expires']!r}")


def _check_expr(c: _Checker, text: Any, kp: tuple[str | int, ...]) -> None:
    from cmx_core.expr import ExpressionError, compile_expression

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
    import jinja2

    try:
        _jinja_parser().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        return exc.message or str(exc)
    return None


@lru_cache(maxsize=1)
def _jinja_parser() -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment()


def _check_version(c: _Checker, value: Any) -> None:
    from packaging.version import InvalidVersion, Version

    try:
        Version(str(value))
    except InvalidVersion:
        raise c.fail(("version",), f"invalid version {str(value)!r} (expected a PEP 440 version such as 1.2.0)") from None


def _check_specifier(c: _Checker, text: Any, kp: tuple[str | int, ...]) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(str(text))
    except InvalidSpecifier:
        raise c.fail(kp, f"invalid version range {text!r} (expected e.g. '>=1.2,<2')") from None


def parse_duration(value: Any) -> float | None:
    """Seconds for ``90``, ``30s``, ``10m``, ``12h``, ``1d``; None if not a duration."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = DURATION_RE.match(str(value).strip())
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None


# ---------------------------------------------------------------------------------------
# Building the model from validated data


def recipe_from_data(data: Mapping[str, Any], path: Path, digest: str, source: str = "core") -> Recipe:
    """Build the frozen model from data that :func:`validate_recipe_data` accepted."""
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
    )


def _deps_from_data(deps: list[Mapping[str, Any]], origin: str) -> tuple[DepSpec, ...]:
    result = []
    for i, dep in enumerate(deps):
        tags = tuple(split_tags(dep["tags"]) if isinstance(dep["tags"], str) else dep["tags"])
        result.append(
            DepSpec(
                index=i,
                tags=tags,
                alias=dep.get("as") or tags[0].replace("-", "_").replace(".", "_"),
                with_=dict(dep.get("with") or {}),
                when=dep.get("when"),
                version=str(dep["version"]) if "version" in dep else None,
                origin=origin,
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
    return CachePolicy(enabled=bool(cache.get("enabled", True)), expires_s=parse_duration(expires) if expires is not None else None)
