"""CM's ``enable_if_env``/``skip_if_env`` as cmx ``when:`` expressions over inputs and facts.

CM evaluates these against the live env dict while it runs. cmx plans first, so a condition
can be translated only when every key it reads is known before anything runs: a key that is
one of the recipe's inputs (its ``default_env``, ``env``, a variation's ``env`` or an
``input_mapping`` target) or a host key cmx detects as a fact. A condition on a key that a
``customize.py`` or a dep sets at run time is *dynamic*: the dep becomes a run-time dep,
decided by :func:`runtime_decision` when its turn comes (:mod:`cmx_cm.lifecycle`).

CM's matching rule (``enable_or_skip_script`` in the CM script automation), reproduced:
values compare lower-cased; a list holding yes/on/true/1 matches any set value that is not
no/off/false/0/empty; a list holding no/off/false/0 matches those and a missing key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TRUE_WORDS = ("yes", "on", "true", "1")
FALSE_WORDS = ("no", "off", "false", "0")

# Host keys CM sets in detect-os that cmx has as facts (cmx_core.facts.system / cmx-detect).
FACT_KEYS = {"HOST_OS_TYPE": "facts.os.name"}


class DynamicCondition(Exception):
    """A condition reads an env key that is only known at run time."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True)
class EnvScope:
    """What a condition may read: env key -> input name, and the env prefix (CM or MLC)."""

    inputs: Mapping[str, str]
    prefix: str

    def reference(self, key: str) -> str:
        if key in self.inputs:
            return f"inputs.{self.inputs[key]}"
        bare = key[len(self.prefix) + 1:] if key.startswith(self.prefix + "_") else None
        if bare is not None and bare in FACT_KEYS:
            return FACT_KEYS[bare]
        raise DynamicCondition(key)


def _cases(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        for variant in (word, word.upper(), word.capitalize()):
            if variant not in out:
                out.append(variant)
    return out


def _literal(values: Sequence[str]) -> str:
    return "[" + ", ".join(repr(v) for v in values) + "]"


def key_matches(ref: str, values: Sequence[Any]) -> str:
    """The expression for one key of an ``enable_if_env`` mapping (CM's rule)."""
    wanted = [str(v).lower() for v in values]
    falsy = _literal([*_cases(FALSE_WORDS), ""])
    if set(wanted) & set(TRUE_WORDS):
        return f"({ref} and {ref} not in {falsy})"
    if set(wanted) & set(FALSE_WORDS):
        return f"(not {ref} or {ref} in {falsy})"
    if "" in wanted:
        return f"(not {ref} or {ref} in {_literal(_cases(wanted))})"
    return f"{ref} in {_literal(_cases(wanted))}"


def all_of(scope: EnvScope, mapping: Mapping[str, Any]) -> str:
    """Every key matches (``enable_if_env``); raises DynamicCondition for a run-time key."""
    return " and ".join(key_matches(scope.reference(k), _as_list(v)) for k, v in mapping.items()) or "True"


def any_of(scope: EnvScope, mapping: Mapping[str, Any]) -> str:
    """Some key matches (``enable_if_any_env``)."""
    return "(" + " or ".join(key_matches(scope.reference(k), _as_list(v)) for k, v in mapping.items()) + ")"


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def dep_condition(scope: EnvScope, dep: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """The ``when:`` of a dep from its four condition keys (None when it has none), and the
    run-time keys of the skip conditions that had to be left out. An enable condition on a
    run-time key raises DynamicCondition: the dep cannot be planned."""
    parts = []
    if isinstance(dep.get("enable_if_env"), dict):
        parts.append(all_of(scope, dep["enable_if_env"]))
    if isinstance(dep.get("enable_if_any_env"), dict):
        parts.append(any_of(scope, dep["enable_if_any_env"]))
    dropped: list[str] = []
    for key, combine in (("skip_if_env", all_of), ("skip_if_any_env", any_of)):
        if isinstance(dep.get(key), dict):
            try:
                parts.append(f"not ({combine(scope, dep[key])})")
            except DynamicCondition as exc:
                dropped.append(exc.key)
    return (" and ".join(parts) if parts else None), tuple(dropped)


def _value_matches(value: Any, wanted: Sequence[Any]) -> bool:
    """CM's rule for one key against the env value at run time (``enable_or_skip_script``)."""
    words = [str(v).lower() for v in wanted]
    text = "" if value is None else str(value).lower()
    if set(words) & set(TRUE_WORDS):
        return text not in (*FALSE_WORDS, "")
    if set(words) & set(FALSE_WORDS):
        return text in (*FALSE_WORDS, "")
    if value is None:
        return "" in words
    return text in words


def runtime_decision(dep: Mapping[str, Any], env: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether CM runs ``dep`` against ``env`` as it is now, and why (one phrase)."""
    for key in ("enable_if_env", "enable_if_any_env"):
        cond = dep.get(key)
        if isinstance(cond, dict) and cond:
            hits = [k for k, v in cond.items() if _value_matches(env.get(k), _as_list(v))]
            ok = len(hits) == len(cond) if key == "enable_if_env" else bool(hits)
            if not ok:
                shown = {k: env.get(k) for k in cond}
                return False, f"{key} {dict(cond)} does not hold (env {shown})"
    for key in ("skip_if_env", "skip_if_any_env"):
        cond = dep.get(key)
        if isinstance(cond, dict) and cond:
            hits = [k for k, v in cond.items() if _value_matches(env.get(k), _as_list(v))]
            if (len(hits) == len(cond)) if key == "skip_if_env" else bool(hits):
                shown = {k: env.get(k) for k in cond}
                return False, f"{key} {dict(cond)} holds (env {shown})"
    has_any = any(isinstance(dep.get(k), dict) and dep.get(k) for k in CONDITION_KEYS)
    return True, "its conditions hold" if has_any else "no condition stops it"


CONDITION_KEYS = ("enable_if_env", "enable_if_any_env", "skip_if_env", "skip_if_any_env")
