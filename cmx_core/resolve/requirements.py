"""What a ``requires:`` value means against a fact's value.

A recipe says ``requires: {<fact path>: <wanted>}``. The fact path is dotted and may index
lists: ``gpus.devices[0].memory_total_bytes``. ``<wanted>`` is one of:

* a plain value: equal to the fact, ignoring case (``os.name: linux``); when the fact is a list,
  the list contains it (``accelerator: h100``). A dotted version matches every version it is a
  prefix of, as ``==12.4.*`` would: ``cuda.selected.version: "12.4"`` holds for 12.4, 12.4.1
  and 12.4.131;
* a comparison, a string starting with an operator: ``">=12.4"``, ``">=12.4,<13"``,
  ``"~=12.4"``, ``">=80e9"``. When the fact is a number (an ``int`` or ``float`` in the facts,
  not a string) the clauses compare numerically (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``
  with operands such as ``80e9``); otherwise the fact is read as a version (its leading
  ``N.N.N`` part) and the value is a ``packaging`` specifier set;
* a list of the above: any of them.

A fact that is missing (``None``) satisfies nothing. A comparison that is neither a valid
specifier set nor a numeric comparison is a :class:`~cmx_core.errors.UsageError` naming the
recipe key, whatever the machine has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cmx_core.errors import UsageError

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

MISSING = object()
OPERATOR_START = "<>=!~"
_NUMERIC_OPS = ("==", "!=", "<=", ">=", "<", ">")
_CLAUSE = re.compile(r"^\s*(==|!=|<=|>=|<|>)\s*([-+]?[\d.]+(?:e[-+]?\d+)?)\s*$", re.IGNORECASE)
_VERSION_LEAD = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")
_DOTTED = re.compile(r"^\d+(?:\.\d+)*$")
_PART = re.compile(r"^([^\[\]]+)((?:\[\d+\])*)$")


@dataclass(frozen=True)
class NumericClause:
    """One numeric comparison such as ``>= 80e9``."""

    op: str
    operand: float

    def holds(self, value: float) -> bool:
        return {
            "==": value == self.operand, "!=": value != self.operand, "<=": value <= self.operand,
            ">=": value >= self.operand, "<": value < self.operand, ">": value > self.operand,
        }[self.op]


@dataclass(frozen=True)
class Comparison:
    """A ``requires`` value that starts with an operator: numeric clauses where every clause
    is numeric (None otherwise), and the specifier set where the text is a valid one."""

    text: str
    numeric: tuple[NumericClause, ...] | None
    specifiers: SpecifierSet | None

    def holds(self, have: Any) -> bool:
        if isinstance(have, (int, float)) and not isinstance(have, bool):
            return self.numeric is not None and all(c.holds(float(have)) for c in self.numeric)
        version = as_version(have)
        return version is not None and self.specifiers is not None and self.specifiers.contains(
            version, prereleases=True)


def parse_comparison(text: str, where: str) -> Comparison:
    """``">=12.4,<13"`` or ``">=80e9"`` as a :class:`Comparison`; a one-line error otherwise."""
    clauses = [_CLAUSE.match(part) for part in text.split(",")]
    numeric = None
    if all(clauses):
        try:
            numeric = tuple(NumericClause(m.group(1), float(m.group(2))) for m in clauses if m)
        except ValueError:
            numeric = None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # deferred: only a recipe with requires:

    try:
        specifiers: SpecifierSet | None = SpecifierSet(text)
    except InvalidSpecifier:
        specifiers = None
    if numeric is None and specifiers is None:
        raise UsageError(f"{where}: '{text}' is neither a version range nor a numeric comparison "
                         "(write e.g. '>=12.4', '>=12.4,<13' or '>=80e9')")
    return Comparison(text, numeric, specifiers)


def as_version(value: Any) -> Version | None:
    """The leading ``N.N.N`` of a version-like value (``"12.4.1"``, ``"550.54.15"``, ``"v1.2"``)."""
    if value is None or isinstance(value, bool):
        return None
    match = _VERSION_LEAD.match(str(value))
    if not match:
        return None
    from packaging.version import InvalidVersion, Version  # deferred: as in parse_comparison

    try:
        return Version(match.group(1))
    except InvalidVersion:
        return None


def _plain_holds(have: Any, wanted: Any) -> bool:
    if str(have).lower() == str(wanted).lower():
        return True
    if _is_number(have) and _is_number(wanted):
        return float(have) == float(wanted)
    text = str(wanted).strip()
    if isinstance(have, str) and _DOTTED.match(text) and "." in text:
        from packaging.specifiers import SpecifierSet  # deferred: as in parse_comparison

        version = as_version(have)
        return version is not None and SpecifierSet(f"=={text}.*").contains(version, prereleases=True)
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def satisfied(have: Any, expected: Any, where: str) -> bool:
    """Whether the fact value ``have`` meets the ``requires`` value ``expected`` (see the module
    docstring); ``where`` names the recipe key in the error for a malformed comparison."""
    wanted = expected if isinstance(expected, list) else [expected]
    tests = [parse_comparison(w, where) if _is_comparison(w) else w for w in wanted]
    have_list = have if isinstance(have, list) else [have]
    for item in have_list:
        if item is None:
            continue
        for test in tests:
            if test.holds(item) if isinstance(test, Comparison) else _plain_holds(item, test):
                return True
    return False


def _is_comparison(value: Any) -> bool:
    return isinstance(value, str) and value.strip()[:1] in OPERATOR_START and value.strip() != ""


def lookup(root: Any, rest: list[str]) -> Any:
    """Walk ``rest`` (``["devices[0]", "memory_total_bytes"]``) down from ``root``; a part may
    index a list (``devices[0]``). :data:`MISSING` when any step is absent."""
    value = root
    for part in rest:
        match = _PART.match(part)
        key, indexes = (match.group(1), re.findall(r"\[(\d+)\]", match.group(2))) if match else (part, [])
        value = value.get(key, MISSING) if isinstance(value, Mapping) else MISSING
        for index in indexes:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else MISSING
    return value


def fact_name(dotted: str) -> str:
    """The fact a path reads: ``gpus`` for ``gpus.devices[0].name``."""
    return dotted.split(".")[0].split("[")[0]
