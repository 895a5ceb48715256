"""One CM/MLC script's metadata -> one cmx recipe (a plain mapping, written as YAML), plus
every key that could not be mapped exactly, with its file, key and reason.

The mapping (docs/cm-bridge.md has the table): the script's env keys become string inputs
(``CM_GENERIC_PYTHON_PACKAGE_NAME`` -> ``cm_generic_python_package_name``), so variations
force them and ``enable_if_env`` conditions read them at plan time; ``input_mapping`` keys
become inputs of their own names; deps of all four lifecycle kinds become cmx deps whose
``_variation`` tags select the dep's variations; a single ``cm.script`` step runs
``customize.py`` and ``run.sh`` under CM's env contract and returns ``new_env``/``new_state``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cmx_cm.conditions import CONDITION_KEYS, DynamicCondition, EnvScope, dep_condition
from cmx_cm.index import (
    INPUT_RE,
    TAG_RE,
    DepQuery,
    IndexEntry,
    ScriptIndex,
    change_id,
    input_name,
    recipe_name_of,
    split_tags,
)
from cmx_cm.meta import ScriptMeta, script_digest

IssueKind = Literal["unmapped", "approximated", "ignored"]
VARIATION_RE = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9_+-]*\.#|[A-Za-z0-9][A-Za-z0-9_+.-]*)$")
"""A variation name: ``fast``, a dotted one (``bert-99.9``, as CM names them: the exact name is
looked up before a parametric stem), or a parametric ``stem.#`` whose stem has no dot."""
VERSION_KEYS = ("version", "version_min", "version_max", "version_max_usable")
DEP_KINDS = ("deps", "prehook_deps", "posthook_deps", "post_deps")
DOC_KEYS = frozenset({"automation_alias", "automation_uid", "category", "name", "tags_help", "developers",
                      "print_env_at_the_end", "input_description", "sort", "docker", "tests", "docker_input_mapping",
                      "print_files_if_script_error", "repo_to_report_errors", "default_variation_tags"})
MAPPED_KEYS = frozenset({"alias", "uid", "tags", "cache", *DEP_KINDS, "input_mapping", "default_env", "env",
                         "new_env_keys", "new_state_keys", "variations", "default_variations", "version",
                         "default_version", "version_min", "version_max", "version_max_usable", "clean_files",
                         "local_env_keys", "predeps", "script_name", "versions"})
DEP_MAPPED = frozenset({"tags", "names", "env", "enable_if_env", "skip_if_env", "enable_if_any_env", "skip_if_any_env",
                        "update_tags_from_env_with_prefix", *VERSION_KEYS})
COMBINATION_MAPPED = frozenset({"env", "default_env", *DEP_KINDS, "new_env_keys", "new_state_keys", "script_name",
                                "group", "default", "base", "description", "state"})
VARIATION_MAPPED = frozenset({"group", "default", "env", "default_env", *DEP_KINDS, "new_env_keys",
                              "new_state_keys", "base", "description", "script_name", "ad", "add_deps", "alias",
                              "state", "adr", "add_deps_recursive"})


ENV_INPUT = {"cm_env": {"type": "string", "default": "{}",
                        "description": "a JSON object of env keys set for the script as CM's --env.KEY=VALUE "
                                       "(any key, declared or not; a run-time dep gets its caller's env here)"},
             "cm_adr": {"type": "string", "default": "",
                        "description": "CM's add_deps_recursive handed down by the callers: |NAME:ID| per change "
                                       "a caller's variation makes to deps named NAME (set by the bridge)"}}


@dataclass(frozen=True)
class Issue:
    """A key of a script's metadata that the recipe does not carry exactly."""

    file: str
    key: str
    reason: str
    kind: IssueKind = "unmapped"

    def to_json(self) -> dict[str, str]:
        return {"file": self.file, "key": self.key, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True)
class Translation:
    """The recipe translated from one script, and what it does not carry."""

    script: ScriptMeta
    name: str
    recipe: Mapping[str, Any]
    issues: tuple[Issue, ...]


def recipe_name(script: ScriptMeta) -> str:
    """``cm.detect-os``: prefixed, so an imported script never shadows a cmx recipe."""
    return recipe_name_of(script.flavor, script.alias)


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)):
        return [str(t).strip() for t in value if str(t).strip()]
    return []


@dataclass
class _Translator:
    script: ScriptMeta
    index: ScriptIndex | None = None
    issues: list[Issue] = field(default_factory=list)
    env_inputs: dict[str, str] = field(default_factory=dict)  # env key -> input name
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    input_mapping: dict[str, str] = field(default_factory=dict)  # input name -> env key
    script_names: dict[str, str] = field(default_factory=dict)  # variation -> its script_name
    variation_deps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # ad/add_deps copies
    hooks: list[dict[str, Any]] = field(default_factory=list)  # run-time deps of the variations
    combinations: list[dict[str, Any]] = field(default_factory=list)  # combination variations (a,b)
    variation_state: dict[str, dict[str, Any]] = field(default_factory=dict)  # variation -> its state

    @property
    def file(self) -> str:
        return str(self.script.meta_file)

    def issue(self, key: str, reason: str, kind: IssueKind = "unmapped") -> None:
        self.issues.append(Issue(self.file, key, reason, kind))

    # -- inputs ------------------------------------------------------------------------------

    def declare_env(self, key: str, where: str, default: Any = None) -> str | None:
        """Make env ``key`` an input (once); the input's name, or None when it cannot be one."""
        if key in self.env_inputs:
            return self.env_inputs[key]
        name = input_name(key)
        if name is None or name in self.inputs:
            self.issue(where, f"env key '{key}' cannot be a cmx input name (lower-cased it is not an identifier "
                              "or collides with another input); it is left out")
            return None
        spec: dict[str, Any] = {"type": "string", "description": f"env {key}"}
        if default is not None:
            spec["default"] = str(default)
        self.inputs[name] = spec
        self.env_inputs[key] = name
        return name

    def scalar(self, value: Any, where: str) -> bool:
        if isinstance(value, (str, int, float, bool)):
            return True
        self.issue(where, f"value of type {type(value).__name__} cannot be a string input; it is left out")
        return False

    def collect_env(self) -> None:
        data = self.script.data
        prefix = self.script.prefix
        for key in VERSION_KEYS:
            env_key = f"{prefix}_{key.upper()}"
            default = data.get(key)
            if key == "version" and default is None:
                default = data.get("default_version")
            self.inputs[key] = {"type": "string", "description": f"{key} (env {env_key})"}
            if default is not None and self.scalar(default, key):
                self.inputs[key]["default"] = str(default)
            self.env_inputs[env_key] = key
        for section in ("default_env", "env"):
            for key, value in _mapping(data.get(section)).items():
                if self.scalar(value, f"{section}.{key}"):
                    name = self.declare_env(str(key), f"{section}.{key}")
                    if name is not None:
                        self.inputs[name]["default"] = str(value)
        for var, spec in _mapping(data.get("variations")).items():
            for section in ("env", "default_env"):
                for key in _mapping(_mapping(spec).get(section)):
                    self.declare_env(str(key), f"variations.{var}.{section}.{key}")
        for name, env_key in _mapping(data.get("input_mapping")).items():
            if not INPUT_RE.match(str(name)) or str(name) in self.inputs:
                self.issue(f"input_mapping.{name}", "not usable as a cmx input name (an identifier in lower case, "
                                                    "distinct from the env inputs); it is left out")
                continue
            self.inputs[str(name)] = {"type": "string", "description": f"sets env {env_key}"}
            self.input_mapping[str(name)] = str(env_key)
        if self.index is not None:
            entry = next((e for e in self.index.entries if e.path == str(self.script.directory)), None)
            for key in self.index.extra_inputs(entry) if entry is not None else {}:
                self.declare_env(key, f"env {key} (passed by a dependent script's dep env)")

    # -- deps ----------------------------------------------------------------------------------

    def alias_for(self, dep: Mapping[str, Any], tags: Sequence[str]) -> str:
        names = _tags(dep.get("names"))
        base = names[0] if names else "_".join(t for t in tags if not t.startswith("_"))[:40]
        base = re.sub(r"[^A-Za-z0-9_]", "_", base) or "dep"
        if base[0].isdigit():
            base = f"d_{base}"
        alias, n = base, 2
        while alias in self.aliases:
            alias, n = f"{base}_{n}", n + 1
        self.aliases.append(alias)
        return alias

    def dep(self, dep: Any, where: str, kind: str, force_hook: bool = False) -> dict[str, Any] | None:
        if not isinstance(dep, dict):
            self.issue(where, "a dep must be a mapping; it is left out")
            return None
        raw = _tags(dep.get("tags"))
        for tag in raw:
            if "#" in tag or "<<<" in tag:
                self.issue(f"{where}.tags", f"tag '{tag}' is filled in at run time; the dep is left out")
                return None
            if not TAG_RE.match(tag.lstrip("-_")):
                self.issue(f"{where}.tags", f"tag '{tag}' is not a valid cmx tag; the dep is left out")
                return None
        query = split_tags(raw)
        if not query.plain and not query.variations:
            self.issue(where, "a dep without tags; it is left out")
            return None
        found = self.matches(query, where)
        target = found[0] if found else None
        prefixed = _mapping(dep.get("update_tags_from_env_with_prefix"))
        hook = kind != "deps" or force_hook or bool(prefixed)
        when: str | None = None
        if not hook:
            try:
                when, dropped = dep_condition(EnvScope(self.env_inputs, self.script.prefix), dep)
            except DynamicCondition:
                hook, dropped = True, ()
            hook = hook or bool(dropped)
        tags = [*query.plain, *query.variations]
        alias = self.alias_for(dep, tags)
        if target is not None and self.index is not None and self.index.pins(target) and target.alias not in tags:
            tags.insert(len(query.plain), target.alias)
        out: dict[str, Any] = {"tags": list(dict.fromkeys([self.script.flavor, *tags])), "as": alias}  # CM repeats tags
        if hook:
            out["_hook"] = {"kind": kind, "if": {k: _plain_condition(dep[k]) for k in CONDITION_KEYS
                                                 if isinstance(dep.get(k), dict)},
                            "target": target.alias if target is not None else None}
        elif when:
            out["when"] = when
        with_ = {k: str(dep[k]) for k in VERSION_KEYS if dep.get(k) not in (None, "")}
        if hook and prefixed:
            out["_hook"]["tags_from_env"] = {str(p): [str(k) for k in _tags(keys)] for p, keys in prefixed.items()}
        if hook:  # run-time deps get the caller's env, as in CM: any key, <<<KEY>>> filled in then
            out["_hook"]["env"] = {str(k): str(v) for k, v in _mapping(dep.get("env")).items()
                                   if isinstance(v, (str, int, float, bool))}
        else:
            with_.update(self.dep_env(dep, target, where, query.variations))
            if target is not None and self.index is not None and self.index.passes_adr(target):
                with_["cm_adr"] = self.adr_template()
        if hook and dep.get("reuse_version"):  # CM hands the caller's version constraints down
            out["_hook"]["reuse_version"] = True
        if with_:
            out["with"] = with_
        alternatives = self.alternatives(found[1:], query, with_)
        if alternatives and target is not None:
            out["cached_alternatives"] = [tags for tags, _ in alternatives]
            if hook:  # the script runner looks in the cache when the dep's turn comes
                out["_hook"]["targets"] = [target.alias, *(alias for _, alias in alternatives)]
        for key in sorted(set(dep) - DEP_MAPPED - ({"reuse_version"} if hook else set())):
            self.issue(f"{where}.{key}", "dep option with no cmx equivalent (cmx deps see only their own inputs)")
        return out

    def adr_marks(self) -> dict[str, str]:
        """variation stem -> the ``|NAME:ID|`` marks of its ``adr`` changes (what it hands down)."""
        return {stem: "".join(f"|{name}:{change_id(change)}|" for name, change in changes)
                for stem, changes in _adr_changes(self.script.data).items()}

    def adr_template(self) -> str:
        """A planned dep's ``cm_adr``: the callers' changes, then those of the selected variations."""
        parts = [f"{{% if {stem!r} in variations %}}{marks}{{% endif %}}" for stem, marks in self.adr_marks().items()]
        return "{{ inputs.cm_adr }}" + "".join(parts)

    def inherited_copies(self, dep: Mapping[str, Any], mapped: dict[str, Any], names: Sequence[str], where: str,
                         kind: str) -> list[dict[str, Any]]:
        """CM's ``add_deps_recursive`` from the callers: for each change some variation of the
        collection makes to a dep of these names, a copy taken when the callers pass it
        (``|NAME:ID|`` in ``cm_adr``); the dep as written only when they pass none."""
        if self.index is None:
            return []
        copies: list[dict[str, Any]] = []
        for name in names:
            for key, change in self.index.recursive_changes(name):
                before = len(self.issues)
                copy = self.dep(_changed(dep, change), f"{where}(adr {name})", kind)
                del self.issues[before:]  # the original's issues are reported once
                if copy is None:
                    continue
                self.guard(copy, f"'|{name}:{key}|' in inputs.cm_adr", "adr_needs", f"|{name}:{key}|")
                copies.append(copy)
            if self.index.recursive_changes(name):
                self.guard(mapped, f"'|{name}:' not in inputs.cm_adr", "adr_unless", f"|{name}:")
        return copies

    @staticmethod
    def guard(mapped: dict[str, Any], test: str, hook_key: str, mark: str) -> None:
        """Add a plan-time ``when`` test to a planned dep, or its run-time form to a hook."""
        if "_hook" in mapped:
            mapped["_hook"].setdefault(hook_key, []).append(mark)
        else:
            mapped["when"] = f"({mapped['when']}) and {test}" if mapped.get("when") else test

    def matches(self, query: DepQuery, where: str) -> list[IndexEntry]:
        """The scripts CM would select for the dep, in CM's order (the first is taken in quiet
        mode; none without an index or a match); the exclusion tags are honoured here, as cmx
        has none."""
        if self.index is None:
            for tag in (*query.excluded, *query.excluded_variations):
                self.issue(f"{where}.tags", f"exclusion tag '-{tag}' has no cmx equivalent; it is dropped",
                           "approximated")
            return []
        found = self.index.select(query)
        shown = ",".join([*query.plain, *("_" + v for v in query.variations)])
        if not found:
            self.issue(f"{where}.tags", f"no script of the collection has tags '{shown}' (CM fails the same way); "
                                        "kept, so another recipe path may provide it")
        elif len(found) > 1:
            others = ", ".join(e.alias for e in found[1:6]) + (" ..." if len(found) > 6 else "")
            self.issue(f"{where}.tags", f"'{shown}' matches {len(found)} scripts; pinned to {found[0].alias}, the "
                                        f"one CM takes in quiet mode (sorted by sort, path; not {others}), unless "
                                        "another is in cmx's cache (cached_alternatives, as CM prefers a script in "
                                        "its cache; a cmx cache entry of the recipe counts, whatever its inputs)",
                       "approximated")
        return found

    def alternatives(self, others: Sequence[IndexEntry], query: DepQuery,
                     inputs: Mapping[str, str]) -> list[tuple[list[str], str]]:
        """(tags, alias) of each of ``others`` (the matches after the one taken) that its alias
        alone names and whose recipe takes every one of the dep's ``inputs``."""
        if self.index is None:
            return []
        found = []
        for entry in others:
            accepted = {*self.index.inputs_of(entry).values(), "cm_adr"}
            if self.index.pins(entry) and set(inputs) <= accepted:
                tags = [self.script.flavor, *query.plain, entry.alias, *query.variations]
                found.append((list(dict.fromkeys(tags)), entry.alias))
        return found

    def dep_env(self, dep: Mapping[str, Any], target: IndexEntry | None, where: str,
                variations: Sequence[str]) -> dict[str, str]:
        """A dep's ``env`` as inputs of its target recipe (the env keys that recipe declares).
        A key the target's own ``env`` or a variation it runs with sets is dropped: CM sets
        those over what the caller passes."""
        out: dict[str, str] = {}
        forced = target.forced_keys(variations) if target is not None else set()
        for key, value in _mapping(dep.get("env")).items():
            name = self.index.inputs_of(target).get(str(key)) if target is not None and self.index else None
            if str(key) in forced:
                continue
            if not isinstance(value, (str, int, float, bool)) or "<<<" in str(value):
                self.issue(f"{where}.env.{key}", "a value filled in from the parent's env at run time (or not a "
                                                 "scalar); left out")
            elif name is None:
                self.issue(f"{where}.env.{key}", "the dep's recipe has no input for this env key (or the dep's "
                                                 "script is not known); left out")
            else:
                out[name] = _verbatim(str(value))
        return out

    def deps_of(self, data: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
        out = []
        for kind in DEP_KINDS:
            for i, dep in enumerate(data.get(kind) or []):
                mapped = self.dep(dep, f"{where}{kind}[{i}]", kind)
                if mapped is not None:
                    out.append(mapped)
        return out

    def script_deps(self) -> list[dict[str, Any]]:
        """The script's own deps. One that a variation changes by name (``ad``/``add_deps``)
        or replaces (a variation dep with the same ``names``, as CM's ``append_deps`` does)
        is taken only when no such variation is selected; each changing variation gets the
        changed copy among its own deps."""
        touched = self.touched()
        out = []
        for kind in DEP_KINDS:
            for i, dep in enumerate(self.script.data.get(kind) or []):
                where = f"{kind}[{i}]"
                mapped = self.dep(dep, where, kind)
                names = _tags(dep.get("names")) if isinstance(dep, dict) else []
                touching = [(v, changes) for n in names for v, changes in touched.get(n, [])]
                copies = self.inherited_copies(dep, mapped, names, where, kind) \
                    if mapped is not None and isinstance(dep, dict) else []
                for target in [mapped, *copies] if mapped is not None and touching else []:
                    if "_hook" in target:
                        target["_hook"]["unless_variations"] = sorted({v for v, _ in touching})
                        continue
                    guard = "not (" + " or ".join(sorted({f"{v!r} in variations" for v, _ in touching})) + ")"
                    target["when"] = f"({target['when']}) and {guard}" if target.get("when") else guard
                if mapped is not None and len(touching) > 1:
                    self.issue(where, "changed by several variations; selected together, each adds its own "
                                      "changed copy (CM merges the changes into one dep)", "approximated")
                for variation, changes in touching:
                    if changes is not None and isinstance(dep, dict):
                        copy = self.dep(_changed(dep, changes), f"variations.{variation}.ad.{names[0]}", kind)
                        if copy is not None:
                            self.variation_deps.setdefault(variation, []).append(copy)
                if mapped is not None:
                    out.append(mapped)
                out.extend(copies)
        return out

    def touched(self) -> dict[str, list[tuple[str, dict[str, Any] | None]]]:
        """dep name -> the variations (stems) that change it (their changes) or replace it (None)."""
        raw = _mapping(self.script.data.get("variations"))
        names = {n for kind in DEP_KINDS for d in self.script.data.get(kind) or [] if isinstance(d, dict)
                 for n in _tags(d.get("names"))}
        out: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
        for name, spec in raw.items():
            if "," in str(name) or not VARIATION_RE.match(str(name)):
                continue
            stem, spec = str(name).removesuffix(".#"), _mapping(spec)
            for key in ("ad", "add_deps", "adr", "add_deps_recursive"):
                recursive = key in ("adr", "add_deps_recursive")
                if recursive and "#" in json.dumps(_mapping(spec.get(key)), default=str):
                    self.issue(f"variations.{name}.{key}", "a change filled in from the variation's parameter: "
                                                           "applied to this script's own deps of those names (as "
                                                           "ad), not handed down to the deps' deps as CM does",
                               "approximated")
                elif recursive and any(not isinstance(c, dict) for c in _mapping(spec.get(key)).values()):
                    self.issue(f"variations.{name}.{key}", "an entry that is not a mapping of dep changes; "
                                                           "ignored")
                for dep_name, changes in _mapping(spec.get(key)).items():
                    if dep_name in names and isinstance(changes, dict):
                        _add_change(out.setdefault(str(dep_name), []), stem, changes)
                    elif not recursive:
                        self.issue(f"variations.{name}.{key}.{dep_name}", "names none of the script's own deps (or "
                                                                          "is not a mapping): a dep another variation "
                                                                          "adds is not changed; ignored")
            for kind in DEP_KINDS:
                for dep in spec.get(kind) or []:
                    for dep_name in _tags(dep.get("names")) if isinstance(dep, dict) else []:
                        if dep_name in names:
                            out.setdefault(dep_name, []).append((stem, None))
        return out

    # -- variations ------------------------------------------------------------------------

    def flattened(self, name: str, variations: Mapping[str, Any], seen: tuple[str, ...] = ()) -> dict[str, Any]:
        """A variation with its ``base`` variations merged in (base first, own keys win)."""
        spec = _mapping(variations.get(name))
        target = spec.get("alias")
        if isinstance(target, str) and target in variations and target != name and target not in seen:
            spec = {**{k: v for k, v in spec.items() if k != "alias"}, "base": [target, *_tags(spec.get("base"))]}
        elif target is not None:
            self.issue(f"variations.{name}.alias", f"alias of '{target}', which is unknown or a cycle; ignored")
        merged: dict[str, Any] = {}
        for base in _tags(spec.get("base")):
            if base in seen or base not in variations:
                self.issue(f"variations.{name}.base", f"base '{base}' is unknown or a cycle; it is ignored")
                continue
            for key, value in self.flattened(base, variations, (*seen, name)).items():
                if key in ("group", "default"):
                    continue
                if key in ("env", "default_env", "state"):
                    merged[key] = {**_mapping(merged.get(key)), **_mapping(value)}
                elif key in DEP_KINDS or key in ("new_env_keys", "new_state_keys"):
                    merged[key] = [*(merged.get(key) or []), *(value or [])]
        for key, value in spec.items():
            if key in ("env", "default_env", "state"):
                merged[key] = {**_mapping(merged.get(key)), **_mapping(value)}
            elif key in DEP_KINDS or key in ("new_env_keys", "new_state_keys"):
                merged[key] = [*(merged.get(key) or []), *(value or [])]
            else:
                merged[key] = value
        return merged

    def combination(self, name: str, spec: Mapping[str, Any]) -> None:
        """A combination variation (``a,b``: taken when all its parts are selected), applied by
        the step: its ``env`` over the inputs, its ``default_env`` where a key is unset, its
        deps as run-time deps needing all the parts."""
        where = f"variations.{name}"
        parts = [p.strip().lstrip("_") for p in name.split(",") if p.strip()]
        known = {str(v).removesuffix(".#") for v in _mapping(self.script.data.get("variations")) if "," not in str(v)}
        if not parts or any(p not in known for p in parts):
            self.issue(where, "a combination of variations the script does not have; left out")
            return
        entry: dict[str, Any] = {"parts": parts}
        for section in ("env", "default_env"):
            values = {str(k): _verbatim(str(v)) for k, v in _mapping(spec.get(section)).items()
                      if self.scalar(v, f"{where}.{section}.{k}")}
            if values:
                entry[section] = values
        keys = [str(k) for k in spec.get("new_env_keys") or []] + \
            [f"state:{k}" for k in spec.get("new_state_keys") or []]
        if keys:
            entry["keys"] = keys
        if isinstance(spec.get("script_name"), str) and spec["script_name"]:
            entry["script_name"] = spec["script_name"].removesuffix(".sh")
        if _mapping(spec.get("state")):
            entry["state"] = _mapping(spec["state"])
        deps = [self.dep(d, f"{where}.{kind}[{i}]", kind, force_hook=True)
                for kind in DEP_KINDS for i, d in enumerate(spec.get(kind) or [])]
        for hook in split_hooks([d for d in deps if d is not None])[1]:
            hook["all_variations"] = parts
            self.hooks.append(hook)
        for key in sorted(set(spec) - COMBINATION_MAPPED):
            self.issue(f"{where}.{key}", "combination variation option with no cmx equivalent")
        self.combinations.append(entry)

    def variation(self, name: str, spec: Mapping[str, Any], defaults: Mapping[str, str]) -> dict[str, Any] | None:
        where = f"variations.{name}"
        if not VARIATION_RE.match(name):
            self.issue(where, "not a valid cmx variation name; left out")
            return None
        out: dict[str, Any] = {}
        group = spec.get("group")
        if group:
            out["group"] = re.sub(r"[^a-z0-9._-]+", "-", str(group).lower()).strip("-") or "group"
            if defaults.get(str(group)) == name:
                out["default"] = True
        if spec.get("default") in (True, "yes", "true"):
            out["default"] = True
        inputs: dict[str, str] = {}
        parametric = name.endswith(".#")
        for section in ("default_env", "env"):
            for key, value in _mapping(spec.get(section)).items():
                target = self.env_inputs.get(str(key))
                if target is None or not self.scalar(value, f"{where}.{section}.{key}"):
                    continue
                if section == "default_env" and ("default" in self.inputs.get(target, {}) or target in inputs):
                    continue  # CM applies a variation's default_env only where the key is unset: here it is set
                text = str(value)
                if "#" in text and not (parametric and text == "#"):
                    self.issue(f"{where}.{section}.{key}", "a value built from the variation's parameter; left out")
                    continue
                inputs[target] = text
        if inputs:
            out["inputs"] = inputs
        deps = [*self.deps_of(spec, f"{where}."), *self.variation_deps.get(name.removesuffix(".#"), [])]
        if deps:
            out["deps"] = deps
        for key in sorted(set(spec) - VARIATION_MAPPED):
            self.issue(f"{where}.{key}", "variation option with no cmx equivalent")
        return out

    def variations(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        data = self.script.data
        raw = _mapping(data.get("variations"))
        defaults = {str(k): str(v) for k, v in _mapping(data.get("default_variations")).items()}
        for group, member in defaults.items():
            if member not in raw:
                self.issue(f"default_variations.{group}", f"names unknown variation '{member}'; ignored")
        out: dict[str, Any] = {}
        new_env: dict[str, list[str]] = {}
        for name in raw:
            flat = self.flattened(str(name), raw)
            if "," in str(name):
                self.combination(str(name), flat)
                continue
            mapped = self.variation(str(name), flat, defaults)
            if mapped is not None and mapped.get("deps"):
                plain, hooks = split_hooks(mapped.pop("deps"), str(name).removesuffix(".#"))
                self.hooks.extend(hooks)
                if plain:
                    mapped["deps"] = plain
            if mapped is not None:
                out[str(name)] = mapped
                keys = [str(k) for k in flat.get("new_env_keys") or []] + \
                    [f"state:{k}" for k in flat.get("new_state_keys") or []]
                if keys:
                    new_env[str(name).removesuffix(".#")] = keys
                if isinstance(flat.get("script_name"), str) and flat["script_name"]:
                    self.script_names[str(name).removesuffix(".#")] = flat["script_name"].removesuffix(".sh")
                if _mapping(flat.get("state")):
                    self.variation_state[str(name).removesuffix(".#")] = _mapping(flat["state"])
        return out, new_env

    # -- versions ----------------------------------------------------------------------------

    def versions(self) -> tuple[dict[str, dict[str, str]], list[dict[str, Any]]]:
        """CM's ``versions``: per version, env applied when that version is asked for (by the
        step, over the inputs) and deps taken only then (``when: inputs.version == ...``)."""
        raw = self.script.data.get("versions")
        if not isinstance(raw, dict) or not raw:
            if raw not in (None, {}):
                self.issue("versions", "not a mapping of version -> env/deps; left out")
            return {}, []
        env: dict[str, dict[str, str]] = {}
        deps: list[dict[str, Any]] = []
        for version, spec in raw.items():
            where = f"versions.{version}"
            spec = _mapping(spec)
            values = {**_mapping(spec.get("default_env")), **_mapping(spec.get("env"))}
            env[str(version)] = {str(k): _verbatim(str(v)) for k, v in values.items()
                                 if self.scalar(v, f"{where}.env.{k}")}
            if spec.get("default_env"):
                self.issue(f"{where}.default_env", "applied as env (CM applies it only when unset)", "approximated")
            for dep in self.deps_of(spec, f"{where}."):
                test = f"inputs.version == {str(version)!r}"
                if "_hook" in dep:
                    dep["_hook"]["version"] = str(version)
                else:
                    dep["when"] = f"{test} and ({dep['when']})" if dep.get("when") else test
                deps.append(dep)
            for key in sorted(set(spec) - {"env", "default_env", *DEP_KINDS}):
                self.issue(f"{where}.{key}", "versions option with no cmx equivalent; left out")
        return env, deps

    # -- the recipe --------------------------------------------------------------------------

    def cache(self, tags: Sequence[str], cache_detections: str | None) -> Any:
        """CM's caching: ``cache: true`` is cached, anything else re-runs every time; with
        ``cache_detections`` (asked for by the user) a ``detect`` script is cached that long."""
        value = self.script.data.get("cache")
        if value in (True, "yes", "true", "True"):
            return True
        if "detect" in tags and cache_detections:
            self.issue("cache", f"CM re-runs it every time; cached for {cache_detections} as asked "
                                "(--cache-detections / CMX_CM_CACHE_DETECTIONS)", "approximated")
            return {"expires": cache_detections}
        return False

    def access_calls(self) -> None:
        """Each ``cmind.access`` action the script's ``customize.py`` calls that the bridge does
        not serve (:mod:`cmx_cm.actions`): the script fails when it makes that call."""
        from cmx_cm.access_scan import calls_in, served  # deferred: only scripts with a customize.py

        path = self.script.directory / "customize.py"
        if not path.is_file():
            return
        for automation, action in sorted(calls_in(path.read_text(errors="replace"))):
            if not served({(automation, action)}):
                self.issue(f"customize.py:access({automation} {action})",
                           f"cmind.access {automation} {action} is not served under cmx-cm: the script fails in one "
                           "line when it makes that call")

    def other_keys(self) -> None:
        data = self.script.data
        for key in sorted(data):
            if key in MAPPED_KEYS:
                continue
            if key in DOC_KEYS:
                self.issue(key, "documentation or container metadata, not used to run the script", "ignored")
            else:
                self.issue(key, "script option with no cmx equivalent")
        if data.get("local_env_keys"):
            self.issue("local_env_keys", "nothing to do: cmx never passes a script's env down to its deps", "ignored")
        if data.get("uid"):
            self.issue("uid", "kept in the description: cmx selects recipes by tags and name", "ignored")


def _plain_condition(value: Mapping[str, Any]) -> dict[str, list[str]]:
    return {str(k): [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])] for k, v in value.items()}


def split_hooks(deps: Sequence[Mapping[str, Any]], variation: str | None = None) -> tuple[list[dict[str, Any]],
                                                                                          list[dict[str, Any]]]:
    """The deps the plan runs first, and the run-time deps the step runs at their turn in CM's
    lifecycle (hooks: their kind, CM conditions, and the variation or version they need)."""
    plain: list[dict[str, Any]] = []
    hooks: list[dict[str, Any]] = []
    for dep in deps:
        if "_hook" not in dep:
            plain.append(dict(dep))
            continue
        entry = {k: v for k, v in dep.items() if k != "_hook"}
        entry.update(dep["_hook"])
        if variation is not None:
            entry["variation"] = variation
        hooks.append(entry)
    return plain, hooks


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _verbatim(text: str) -> str:
    """A step parameter that cmx must not render as a template: CM fills ``{{KEY}}`` itself."""
    if ("{{" in text or "{%" in text or "{#" in text) and "endraw" not in text:
        return "{% raw %}" + text + "{% endraw %}"
    return text


def _add_change(found: list[tuple[str, dict[str, Any] | None]], stem: str, changes: Mapping[str, Any]) -> None:
    """One variation's changes to one dep: its ``ad`` and ``adr`` for the same dep merge into one
    change (tags joined), as CM applies both to the same dep."""
    for n, (other, before) in enumerate(found):
        if other == stem and before is not None:
            merged = {**before, **changes}
            if "tags" in before and "tags" in changes:
                merged["tags"] = ",".join([*_tags(before["tags"]), *(t for t in _tags(changes["tags"])
                                                                      if t not in _tags(before["tags"]))])
            found[n] = (stem, merged)
            return
    found.append((stem, dict(changes)))


def _changed(dep: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A dep with a variation's changes, by CM's rule: tags appended, conditions kept as they
    were, mappings merged, lists extended, other values replaced."""
    out = dict(dep)
    for key, value in changes.items():
        if key == "tags":
            old = _tags(dep.get("tags"))
            out["tags"] = ",".join([*old, *(t for t in _tags(value) if t not in old and "<<<" not in t)])
        elif "enable_if_" in key or "skip_if_" in key:
            continue
        elif isinstance(value, dict):
            out[key] = {**_mapping(dep.get(key)), **value}
        elif isinstance(value, list):
            out[key] = [*(dep.get(key) or []), *value] if isinstance(dep.get(key), list) else list(value)
        else:
            out[key] = value
    return out


def _outputs(new_env_keys: Sequence[str]) -> dict[str, Any]:
    outputs: dict[str, Any] = {
        "new_env": {"description": "the env keys the script declares (new_env_keys), as CM returns them",
                    "type": "object"},
        "new_state": {"description": "the state keys the script declares (new_state_keys)", "type": "object"},
        "version": {"description": "the version customize.py detected, or null", "type": "string"},
        "script": {"description": "the script directory and a stat stamp of its files, the path the script said "
                                  "it depends on, and what MLC's validate_cache.sh is run with (revalidate the cache)",
                   "type": "object"},
        "not_exact": {"description": "the script's metadata keys this recipe does not carry exactly (key, kind: "
                                     "unmapped or approximated, reason), as in the import report",
                      "type": "array"},
        "lifecycle": {"description": "the run-time deps (prehook_deps, posthook_deps, post_deps and deps whose "
                                     "condition reads run-time env), each with its kind, whether it ran and why",
                      "type": "array"},
    }
    for key in new_env_keys:
        name = input_name(key)
        if name and not any(c in key for c in "*?<+") and name not in outputs:
            outputs[name] = {"description": f"env {key}", "type": "string"}
    return outputs


def index_entry(script: ScriptMeta) -> IndexEntry:
    """The script's entry in its collection's index (what a dep on it needs to know)."""
    t = _Translator(script)
    t.collect_env()
    sort = script.data.get("sort", 0)
    changes = tuple(sorted({c for v in _adr_changes(script.data).values() for c in v}))
    return IndexEntry(alias=script.alias, tags=tuple(_tags(script.data.get("tags"))),
                      variations=tuple(str(v) for v in _mapping(script.data.get("variations"))),
                      sort=sort if isinstance(sort, int) else 0, path=str(script.directory),
                      deps=_static_dep_tags(script.data), dep_env=_dep_env_keys(script.data),
                      dep_names=_dep_names(script.data), forced_env=_forced_env(script.data), adr=changes,
                      env_inputs={k: v for k, v in t.env_inputs.items()} | {v: k for k, v in t.input_mapping.items()
                                                                             if v not in t.env_inputs})


def _static_dep_tags(data: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The tags of the script's top-level deps, except those filled in at run time."""
    found = (_tags(d.get("tags")) for kind in DEP_KINDS for d in data.get(kind) or [] if isinstance(d, dict))
    return tuple(tuple(tags) for tags in found if tags and not any("#" in t or "<<<" in t for t in tags))


def _forced_env(data: Mapping[str, Any]) -> tuple[tuple[str, str, bool, tuple[str, ...]], ...]:
    """:attr:`IndexEntry.forced_env`: the keys the script's ``env`` and each variation's ``env``
    set, which CM applies over the caller's env (``default_env`` only fills what is unset)."""
    defaults = _mapping(data.get("default_variations"))
    out = [("", "", False, tuple(sorted(str(k) for k in _mapping(data.get("env")))))]
    for name, spec in _mapping(data.get("variations")).items():
        spec = _mapping(spec)
        group = str(spec.get("group") or "")
        keys = tuple(sorted(str(k) for k in _mapping(spec.get("env"))))
        if "," in str(name) or not (group or keys):
            continue
        default = spec.get("default") in (True, "yes", "true") or (bool(group) and defaults.get(group) == name)
        out.append((str(name), group, default, keys))
    return tuple(entry for entry in out if entry[0] or entry[3])


def _dep_names(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of every dep of the script, its variations' and versions' included."""
    sections = [data, *(_mapping(v) for v in _mapping(data.get("variations")).values()),
                *(_mapping(v) for v in _mapping(data.get("versions")).values())]
    return tuple(sorted({n for section in sections for kind in DEP_KINDS for d in section.get(kind) or []
                         if isinstance(d, dict) for n in _tags(d.get("names"))}))


def _adr_changes(data: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """variation stem -> (dep name, change as canonical JSON) of its ``adr``/``add_deps_recursive``;
    a change filled in from the variation's parameter (``#``) is not one the collection can list."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, spec in _mapping(data.get("variations")).items():
        if "," in str(name) or not VARIATION_RE.match(str(name)):
            continue
        for key in ("adr", "add_deps_recursive"):
            for dep_name, change in _mapping(_mapping(spec).get(key)).items():
                if isinstance(change, dict) and "#" not in json.dumps(change):
                    out.setdefault(str(name).removesuffix(".#"), []).append(
                        (str(dep_name), json.dumps(change, sort_keys=True, default=str)))
    return out


def _dep_env_keys(data: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """(dep tags, env keys) of every dep, the variations' and versions' included, that sets env."""
    sections = [data, *(_mapping(v) for v in _mapping(data.get("variations")).values()),
                *(_mapping(v) for v in _mapping(data.get("versions")).values())]
    found = []
    for section in sections:
        for kind in DEP_KINDS:
            for dep in section.get(kind) or []:
                if isinstance(dep, dict) and _mapping(dep.get("env")) and _tags(dep.get("tags")):
                    found.append((tuple(_tags(dep.get("tags"))), tuple(sorted(str(k) for k in dep["env"]))))
    return tuple(found)


def translate(script: ScriptMeta, index: ScriptIndex | None = None,
              cache_detections: str | None = None) -> Translation:
    """Translate one script; never raises for odd metadata (it goes into the issues). With
    the collection's ``index``, each dep is pinned to the script CM would select."""
    t = _Translator(script, index)
    data = script.data
    t.collect_env()
    tags: list[str] = [script.flavor]
    for tag in [*_tags(data.get("tags")), script.alias]:
        if TAG_RE.match(tag) and tag not in tags:
            tags.append(tag)
        elif not TAG_RE.match(tag):
            t.issue("tags", f"tag '{tag}' is not a valid cmx tag; dropped")
    deps = t.script_deps()
    version_env, version_deps = t.versions()
    deps.extend(version_deps)
    deps, hooks = split_hooks(deps)
    variations, var_keys = t.variations()
    hooks.extend(t.hooks)
    new_env_keys = [str(k) for k in data.get("new_env_keys") or []]
    new_state_keys = [str(k) for k in data.get("new_state_keys") or []]
    t.other_keys()
    t.access_calls()
    cache = t.cache(tags, cache_detections)
    name = recipe_name(script)
    not_exact = [{"key": i.key, "kind": i.kind, "reason": i.reason} for i in t.issues if i.kind != "ignored"]
    params: dict[str, Any] = {
        "script_dir": str(script.directory),
        "flavor": script.flavor,
        "script_digest": script_digest(script.directory),
        "env_inputs": {v: k for k, v in t.env_inputs.items()},
        "input_mapping": t.input_mapping,
        "new_env_keys": new_env_keys,
        "new_state_keys": new_state_keys,
        "variation_keys": var_keys,
        "deps": list(t.aliases),
        "clean_files": [str(f) for f in data.get("clean_files") or []],
        "script_name": str(data.get("script_name") or "run"),
        "variation_script_names": t.script_names,
        "version_env": version_env,
        "tags": [str(x) for x in _tags(data.get("tags"))],
        "hooks": sorted(hooks, key=lambda h: DEP_KINDS.index(h["kind"])),
        "combinations": t.combinations,
        "variation_state": t.variation_state,
        "not_exact": not_exact,
        "local_env_keys": [str(k) for k in data.get("local_env_keys") or []],
        "adr_marks": t.adr_marks(),
        "forced_env": {name: list(keys) for name, _, _, keys in _forced_env(data) if keys},
    }
    if data.get("version") is None and isinstance(data.get("default_version"), (str, int, float)):
        params["default_version"] = str(data["default_version"])
    recipe: dict[str, Any] = {
        "name": name,
        "tags": tags,
        "summary": f"{script.flavor.upper()} script {script.alias} ({data.get('category') or 'uncategorised'})",
        "description": f"Imported from {script.meta_file} (alias {script.alias}, uid {data.get('uid', 'none')}) "
                       "by cmx-cm.",
        "inputs": dict(sorted({**t.inputs, **ENV_INPUT}.items())),
    }
    if variations:
        recipe["variations"] = variations
    if deps:
        recipe["deps"] = deps
    recipe["steps"] = [{"uses": "cm.script", "with": params}]
    recipe["outputs"] = _outputs(new_env_keys)
    recipe["cache"] = cache
    return Translation(script=script, name=name, recipe=recipe, issues=tuple(t.issues))
