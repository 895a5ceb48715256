"""Run-time deps, run by the script runner at their turn in CM's lifecycle.

CM runs a script as: deps -> preprocess -> prehook_deps -> the native script ->
posthook_deps -> postprocess -> post_deps, and decides each dep's ``enable_if_env`` /
``skip_if_env`` against the env as it is at that moment. cmx's plan runs a node's deps
before it, so the bridge keeps in the plan only the ``deps`` whose conditions read inputs;
every other dep (a hook) is in the step's ``hooks`` parameter, and this module runs it when
its turn comes: a child ``cmx run recipe`` of the dep's recipe, given the caller's env (less
CM's local keys) as its ``cm_env`` input, as CM passes its env down. Its ``new_env`` and
``new_state`` are merged back as CM merges a dep's result. Each decision (ran or skipped,
and why) is recorded in the result's ``lifecycle`` output.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from cmx_cm._shim.cmind.utils import merge_dicts
from cmx_cm.child import run_child
from cmx_cm.conditions import runtime_decision
from cmx_cm.index import recipe_name_of

LOCAL_KEYS = ("VERSION", "VERSION_MIN", "VERSION_MAX", "VERSION_MAX_USABLE", "DETECTED_VERSION", "INPUT", "OUTPUT",
              "OUTBASENAME", "OUTDIRNAME", "NAME", "EXTRA_CACHE_TAGS", "TMP_*", "GIT_*", "RENEW_CACHE_ENTRY",
              "QUIET")
"""CM's default ``local_env_keys`` (without the prefix): never passed down to a dep."""


def applies(hook: Mapping[str, Any], variations: Sequence[str], version: str, adr: str = "") -> bool:
    """Whether the selected variations, version and the callers' ``add_deps_recursive`` (``adr``,
    ``|NAME:ID|`` marks) take ``hook`` at all."""
    if not all(mark in adr for mark in hook.get("adr_needs") or []):
        return False
    if any(mark in adr for mark in hook.get("adr_unless") or []):
        return False
    if hook.get("variation") and hook["variation"] not in variations:
        return False
    if not all(v in variations for v in hook.get("all_variations") or []):
        return False
    if any(v in variations for v in hook.get("unless_variations") or []):
        return False
    return not (hook.get("version") and hook["version"] != version)


def passed_env(env: Mapping[str, Any], prefix: str, local: Sequence[str]) -> dict[str, Any]:
    """The caller's env a dep gets: all of it but CM's local keys and the script's own."""
    patterns = [f"{prefix}_{k}" for k in LOCAL_KEYS] + list(local)
    return {k: v for k, v in env.items() if not any(fnmatch.fnmatchcase(k, p) for p in patterns)}


def tags_from_env(hook: Mapping[str, Any], dep_env: Mapping[str, Any], env: Mapping[str, Any]) -> list[str]:
    """CM's ``update_tags_from_env_with_prefix``: ``{"_version.": [KEY]}`` adds the variation
    ``version.<value>`` for each key set in the dep's env or else the caller's."""
    out = []
    for prefix, keys in dict(hook.get("tags_from_env") or {}).items():
        for key in keys:
            value = str(dep_env.get(key) or env.get(key) or "").strip()
            if value:
                out.append(str(prefix).lstrip("_") + value)
    return out


def _fill(value: str, env: Mapping[str, Any]) -> str:
    return re.sub(r"<<<(.*?)>>>", lambda m: str(env.get(m.group(1), "")), value)


def run_hooks(kind: str, request: Mapping[str, Any], env: MutableMapping[str, Any],
              state: MutableMapping[str, Any], record: list[dict[str, Any]]) -> None:
    """Run the hooks of ``kind`` in order, each decided against ``env`` as it is now."""
    variations = [str(v) for v in request.get("variations") or []]
    for hook in request.get("hooks") or []:
        inherited = str(request.get("adr") or "")
        if hook.get("kind") != kind or not applies(hook, variations, str(request.get("version_wanted") or ""),
                                                   inherited):
            continue
        run_it, why = runtime_decision(hook.get("if") or {}, env)
        entry = {"kind": kind, "as": hook.get("as"), "tags": ",".join(hook.get("tags") or []),
                 "ran": run_it, "reason": why}
        record.append(entry)
        if not run_it:
            continue
        outputs = _run_one(hook, request, env)
        entry["recipe"] = outputs.pop("_recipe", None)
        entry["tags"] = outputs.pop("_tags", entry["tags"])

        merge_dicts({"dict1": env, "dict2": dict(outputs.get("new_env") or {}), "append_lists": True,
                     "append_unique": True})
        merge_dicts({"dict1": state, "dict2": dict(outputs.get("new_state") or {}), "append_lists": True,
                     "append_unique": True})


def cached_first(hook: Mapping[str, Any], flavor: str) -> tuple[list[str], str | None]:
    """The hook's tags and target, or those of the first of its ``cached_alternatives`` whose
    recipe is in cmx's cache where the one its tags select is not: CM takes a script already in
    its cache first where a dep matches several, and decides it when the dep's turn comes, as
    here. The target is None for a hook without alternatives."""
    options = [list(hook.get("tags") or []), *(list(t) for t in hook.get("cached_alternatives") or [])]
    targets = [str(t) for t in hook.get("targets") or []]
    if len(targets) != len(options):
        return options[0], None
    from cmx_core.api import cached_recipes  # deferred: the public API's imports, only for a dep with choices

    recipes = [recipe_name_of(flavor, target) for target in targets]
    cached = cached_recipes(recipes)
    chosen = next((i for i, recipe in enumerate(recipes) if recipe in cached), 0)
    return options[chosen], targets[chosen]


def _run_one(hook: Mapping[str, Any], request: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    prefix = str(request.get("prefix", "CM"))
    target = hook.get("target") or ",".join(hook.get("tags") or [])
    dep_env = passed_env(env, prefix, request.get("local_env_keys") or [])
    if hook.get("reuse_version"):  # CM's reuse_version: the caller's VERSION* keys are passed down after all
        dep_env.update({k: v for k, v in env.items() if k.startswith(f"{prefix}_VERSION")})
    dep_env.update({k: _fill(str(v), env) for k, v in dict(hook.get("env") or {}).items()})
    chosen, chosen_target = cached_first(hook, prefix.lower())
    tags = [*chosen, *tags_from_env(hook, dep_env, env)]
    digest = hashlib.sha256(json.dumps([tags, hook.get("with"), dep_env, request.get("adr") or ""], sort_keys=True,
                                       default=str).encode()).hexdigest()[:12]
    argv = ["run", "recipe", f"--tags={','.join(tags)}"]
    if request.get("recipe_dir"):
        argv += ["--recipes", str(request["recipe_dir"])]
    argv += [f"--{k}={v}" for k, v in dict(hook.get("with") or {}).items()]
    argv.append("--cm_env=" + json.dumps(dep_env, sort_keys=True))
    if request.get("adr") and hook.get("target"):  # a script of the collection: CM hands adr down to it
        argv.append(f"--cm_adr={request['adr']}")
    what = f"{hook.get('kind')} {hook.get('as')} (tags {','.join(tags)})"
    document = run_child(argv, f"{chosen_target or target}#{digest}", what, request.get("timeout_s"))
    outputs = dict(document["outputs"])
    outputs["_recipe"] = document.get("recipe") or chosen_target or target
    outputs["_tags"] = ",".join(tags)
    return outputs
