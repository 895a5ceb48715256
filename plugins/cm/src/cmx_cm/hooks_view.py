"""What ``cmx plan`` and ``cmx explain`` show of a bridged script's run-time deps (its hooks:
``prehook_deps``, ``posthook_deps``, ``post_deps`` and the deps whose condition reads env
that only the run sets): each one as a conditional dep, with the CM rule decided at its turn
(:func:`cmx_cm.conditions.runtime_decision`) in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmx_cm.conditions import CONDITION_KEYS
from cmx_core.api import ConditionalDep


def conditional_deps(params: Mapping[str, Any]) -> list[ConditionalDep]:
    """The ``cm.script`` step's hooks as conditional deps."""
    hooks = params.get("hooks")
    if not isinstance(hooks, list):
        return []
    return [_one(hook) for hook in hooks if isinstance(hook, Mapping)]


def _one(hook: Mapping[str, Any]) -> ConditionalDep:
    tags = hook.get("tags") or []
    shown = ",".join(str(t) for t in tags) if isinstance(tags, list) else str(tags)
    return ConditionalDep(stage=str(hook.get("kind") or "deps"), tags=shown, condition=condition_text(hook),
                          alias=str(hook.get("as") or ""))


def condition_text(hook: Mapping[str, Any]) -> str:
    """``skip_if_env CM_TMP_X in [yes]; with variation _cuda`` (empty when nothing decides it)."""
    given = hook.get("if")
    conditions: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    parts = []
    for key in CONDITION_KEYS:
        cond = conditions.get(key)
        if isinstance(cond, Mapping) and cond:
            parts.append(f"{key} " + ", ".join(f"{k} in [{', '.join(str(v) for v in _as_list(vals))}]"
                                               for k, vals in cond.items()))
    if hook.get("variation"):
        parts.append(f"with variation _{hook['variation']}")
    if hook.get("unless_variations"):
        parts.append("unless variation " + " or ".join(f"_{v}" for v in hook["unless_variations"]))
    if hook.get("version"):
        parts.append(f"with version {hook['version']}")
    return "; ".join(parts)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]
