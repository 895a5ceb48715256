"""The resolver: tags → recipes, variations, typed inputs and a DAG of nodes. Pure.

Given a catalog, the query and a fact store, it touches nothing else: no process runs, no
file is written. Every choice is recorded as a :class:`Decision` so ``cmx explain`` can
show why each candidate and variation was taken or rejected. The result is deterministic:
deps resolve in file order and identical deps (same recipe, variations and inputs) share one
node.

The graph walk is iterative: each node is a generator that yields the deps it needs and
receives their node ids, and :meth:`Resolver._walk` drives them from an explicit stack, so a
5,000-deep chain resolves without touching Python's recursion limit. The path from the root
(for cycles and ``cmx explain``) is a linked :class:`Path` shared by all nodes below it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Collection, Generator, Iterator, Mapping
from contextlib import contextmanager, suppress
from operator import attrgetter
from pathlib import PurePath
from typing import Any, NamedTuple

from cmx_core.catalog.catalog import Catalog, Listed
from cmx_core.catalog.scan import RecipeScan, fixed_defaults, scan_of
from cmx_core.errors import CmxError, ResolveError, UsageError, did_you_mean
from cmx_core.facts.store import FactStore
from cmx_core.providers.types import StepType
from cmx_core.recipes.expr import MISSING, ExpressionError, compile_expression
from cmx_core.recipes.model import CLI_RESERVED_INPUTS as reserved
from cmx_core.recipes.model import DepSpec, Recipe, StepSpec, line_of
from cmx_core.recipes.template import render_value
from cmx_core.recipes.template_checks import (
    RUN_NAMES,
    Scope,
    check_dep_templates,
    check_node_bounds,
    check_node_templates,
)
from cmx_core.resolve import requirements
from cmx_core.resolve import versions as resolve_versions
from cmx_core.resolve.decision import Candidate, Decision, Path
from cmx_core.resolve.env_args import fold_env_args
from cmx_core.resolve.input_hints import COMMAND_LINE, unknown_input
from cmx_core.resolve.step_params import check_step_params

StepLookup = Callable[[str], StepType]
CachedLookup = Callable[[Collection[str]], Collection[str]]
"""Of some recipe names, those with a valid entry in the cache (the engine hands it over:
the resolver never opens the cache itself)."""
"""The step type of a name (``Registry.step``); raises a CmxError naming what is missing."""


class _Need(NamedTuple):
    """A dep a node asks the walk to resolve; the walk sends back its node id."""

    tags: tuple[str, ...]
    inputs: Mapping[str, Any]
    origin: str
    path: Path | None
    version: str | None = None  # the dep's ``version:`` constraint
    where: str = ""  # the dep's key path (``recipe.yaml: deps.0``) for errors
    asker: tuple[Recipe, tuple[str | int, ...]] | None = None  # the recipe and key path of the dep


_NodeWalk = Generator[_Need, str, str]
_NodeKey = tuple[str, Any, Any]
"""(recipe name, frozen variations, frozen inputs): nodes with equal keys are one node."""

_NAME = attrgetter("name")

SELF_DEPTH = 100
"""How many times one recipe may be on a dependency path (with other variations or inputs)."""


class _Selection(NamedTuple):
    """What a query's tags select in a catalog, before a dep's ``version:`` chooses."""

    seen: dict[str, Listed]  # name -> every recipe with one of the tags (most not built)
    candidates: tuple[Candidate, ...]
    accepted: tuple[tuple[Recipe, dict[str, Any]], ...]  # with the variations the tags choose


class ResolvedNode(NamedTuple):
    """One node of the resolved graph."""

    id: str
    recipe: Recipe
    variations: Mapping[str, Any]
    groups: Mapping[str, str | None]
    inputs: Mapping[str, Any]
    deps: Mapping[str, str]
    steps: tuple[StepSpec, ...]
    facts_used: Mapping[str, Any]
    requires: Mapping[str, Any]
    container: str | None


class Resolution(NamedTuple):
    root: str
    nodes: dict[str, ResolvedNode]
    decisions: list[Decision]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a walk: a big plan allocates objects by the
    hundred thousand and makes few cycles, and full collections over a growing heap would make
    a 10,000-node plan's time grow faster than its size.

    Afterwards what the walk allocated is moved to the oldest generation without a collection
    (``gc.freeze`` then ``gc.unfreeze``): re-enabled as it was, the collector's next young
    collection would traverse every one of those objects at once (about 0.1 s for a
    10,000-node plan), most of them the plan the caller keeps. A cycle among them is still
    collected, by the next full collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


class Resolver:
    """Resolves queries against a catalog; with ``step_lookup`` (``Registry.step``) each
    step's type is looked up and its arguments checked against the type's schema.
    ``no_match_hint(tags)`` adds to a no-match error (the engine names a missing plugin)."""

    def __init__(self, catalog: Catalog, facts: FactStore, step_lookup: StepLookup | None = None,
                 no_match_hint: Callable[[tuple[str, ...]], str] | None = None,
                 every_candidate: bool = False, cached: CachedLookup | None = None) -> None:
        self.catalog = catalog
        self.cached = cached
        self.every_candidate = every_candidate
        self.facts = facts
        self.step_lookup = step_lookup
        self.no_match_hint = no_match_hint
        self._scans = catalog.scans
        self._selections: dict[tuple[bool, tuple[str, ...]], _Selection] = catalog.selections
        self.nodes: dict[str, ResolvedNode] = {}
        self.memo: dict[_NodeKey, str] = {}
        self.decisions: list[Decision] = []
        self._facts_available: frozenset[str] | None = None
        # The nodes on the path being resolved (cycle check): node key -> depth on the path,
        # and how often each recipe is on it (with any variations and inputs).
        self._active: dict[_NodeKey, int] = {}
        self._on_path: dict[str, int] = {}

    def resolve(self, tags: tuple[str, ...], inputs: Mapping[str, Any]) -> Resolution:
        if not [t for t in tags if not t.startswith("-")]:
            raise UsageError("--tags needs at least one tag, e.g. --tags=detect,os")
        self._active.clear()
        self._on_path.clear()
        with paused_gc():
            root = self._walk(self._node(_Need(tags, inputs, "--input", None)))
        return Resolution(root, self.nodes, self.decisions)

    def _walk(self, root: _NodeWalk) -> str:
        """Drive the node generators depth-first from an explicit stack (no recursion)."""
        stack = [root]
        answer: str | None = None
        while True:
            try:
                need = stack[-1].send(answer)  # type: ignore[arg-type]  # None starts a generator
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return str(done.value)
                answer = done.value
                continue
            stack.append(self._node(need))
            answer = None

    # -- one node -------------------------------------------------------------------------

    def _node(self, need: _Need) -> _NodeWalk:
        tags, path = need.tags, need.path
        decision = Decision(tags, path)
        self.decisions.append(decision)
        try:
            recipe, chosen = self._select(tags, decision, need.version, need.where)
        except ResolveError as exc:
            if need.asker is None or need.where in str(exc):
                raise
            asker, keypath = need.asker  # name the file, line and key of the dep that asked
            line = line_of(asker.path, (*keypath, "tags"))
            raise ResolveError(f"{asker.path}:{line}: {'.'.join(map(str, keypath))}.tags: {exc}") from None
        scanned = scan_of(recipe, self._scans)
        variations, groups = self._variations(recipe, chosen, decision, scanned)
        inputs = self._inputs(recipe, variations, need.inputs, need.origin, scanned)
        memo_key = (recipe.name, _frozen(variations), _frozen(inputs))
        if memo_key in self._active or self._on_path.get(recipe.name, 0) >= SELF_DEPTH:
            self._check_cycle(memo_key, recipe, variations, decision)
        known = self.memo.get(memo_key)
        if known is not None:
            decision.node_id = known
            return known
        used: dict[str, Any] = {}
        context = self._context(inputs, groups, variations, used)
        requires = self._check_requires(recipe, variations, used)
        scope = Scope(RUN_NAMES, scanned.groups, self._available_facts(),
                      facts_file=self.facts.source if self.facts.source != "local" else None)
        specs = _dep_specs(recipe, variations)
        deps: dict[str, str] = {}
        skipped: dict[str, str] = {}
        if specs:  # a leaf is never on the path of a node below it: no generator, no path cell
            self._enter(memo_key)
            deps, skipped = yield from self._deps(recipe, specs, context, Path(recipe.name, path), decision, scope)
            self._leave(memo_key)
        if deps or skipped:
            nodes = self.nodes
            outputs = {alias: tuple(nodes[dep].recipe.outputs) for alias, dep in deps.items()}
            scope = Scope(RUN_NAMES, scanned.groups, scope.facts, outputs, skipped, facts_file=scope.facts_file)
        steps = self._steps(recipe, context, decision, used, scope, scanned)
        node_id = self._node_id(recipe, variations)
        container = recipe.container
        for name in variations:
            container = recipe.variations[_var_key(recipe, name)].container or container
        self.nodes[node_id] = ResolvedNode(node_id, recipe, variations, groups, inputs, deps,
                                           steps, dict(sorted(used.items())), requires, container)
        self.memo[memo_key] = node_id
        decision.node_id = node_id
        return node_id

    def _check_cycle(self, key: _NodeKey, recipe: Recipe, variations: Mapping[str, Any],
                     decision: Decision) -> None:
        """A cycle is the same recipe with the same variations and inputs on the path: a
        recipe may depend on itself with other variations (CM's ``get-generic-python-lib``
        with ``_package.x`` on itself with ``_pip``). One that keeps asking for itself with
        new inputs never repeats exactly, so :data:`SELF_DEPTH` levels of it are an error."""
        depth = self._active.get(key)
        repeats = self._on_path.get(recipe.name, 0)
        if depth is None and repeats < SELF_DEPTH:
            return
        chain = decision.chain
        if depth is None:
            raise ResolveError(f"recipe {recipe.name} depends on itself {repeats} levels deep, with other "
                               f"variations or inputs each time, and would never end: "
                               f"{' -> '.join(chain[-3:])} -> ...; make its deps stop (in {recipe.path})")
        shown = ",".join(f"{n}.{v}" if v is not True else n for n, v in variations.items())
        last = f"{recipe.name}[{shown}]" if shown else recipe.name
        cycle = " -> ".join((*chain[depth:], last))
        raise ResolveError(f"dependency cycle: {cycle} (in {recipe.path})")

    def _enter(self, key: _NodeKey) -> None:
        self._active[key] = len(self._active)
        self._on_path[key[0]] = self._on_path.get(key[0], 0) + 1

    def _leave(self, key: _NodeKey) -> None:
        del self._active[key]
        self._on_path[key[0]] -= 1

    def _available_facts(self) -> frozenset[str]:
        if self._facts_available is None:
            self._facts_available = frozenset(self.facts.available())
        return self._facts_available

    def _node_id(self, recipe: Recipe, variations: Mapping[str, Any]) -> str:
        base = recipe.name
        if base in self.nodes:
            chosen = [f"{n}.{v}" if v is not True else n for n, v in variations.items()]
            base = f"{recipe.name}[{','.join(chosen)}]"
        node_id, n = base, 2
        while node_id in self.nodes:
            node_id, n = f"{base}#{n}", n + 1
        return node_id

    # -- selection ------------------------------------------------------------------------

    def _select(self, tags: tuple[str, ...], decision: Decision, version: str | None = None,
                where: str = "") -> tuple[Recipe, dict[str, Any]]:
        """The one recipe the tags (and a dep's ``version:`` constraint) choose."""
        positive = [t.lstrip("_") for t in tags if not t.startswith("-")]
        negative = {t[1:] for t in tags if t.startswith("-")}
        selection = self._selections.get((self.every_candidate, tags))
        if selection is None:
            selection = self._candidates(positive, negative, decision, every=self.every_candidate)
            if not selection.accepted and not self.every_candidate:  # the error lists the rejected ones
                selection = self._candidates(positive, negative, decision, every=True)
            self._selections[(self.every_candidate, tags)] = selection
        seen = selection.seen
        decision.candidates.extend(selection.candidates)
        accepted = list(selection.accepted)
        if version and accepted:
            return resolve_versions.choose(accepted, version, where, decision)
        if len(accepted) > 1:
            exact = [a for a in accepted if set(a[0].tags) == set(positive)]
            accepted = exact if len(exact) == 1 else accepted
        if len(accepted) == 1:
            return accepted[0]
        if not accepted:
            decision.candidates[:] = _with_hints(decision.candidates, seen, positive, negative)
        hint = self.no_match_hint(tags) if self.no_match_hint is not None and not accepted else ""
        raise ResolveError(_selection_error(tags, accepted, decision.candidates, self.catalog, hint))

    def _candidates(self, positive: list[str], negative: set[str], decision: Decision, every: bool) -> _Selection:
        """The recipes that every ``positive`` tag selects (``every``: each recipe with one of
        them, as ``cmx explain`` and a no-match error list them), why each is taken or
        rejected, and the shadowed definitions of their names: the same for every node asking
        these tags. Tags that give a variation two values are an error, with the candidates
        before it in ``decision``."""
        catalog = self.catalog
        seen: dict[str, Listed] = {}
        if every:
            for tag in positive:
                for item in catalog.listed_with_tag(tag):
                    seen.setdefault(item.name, item)
        else:  # from the rarest tag's posting list: the cost grows with the plan
            for item in catalog.candidates(positive):
                seen.setdefault(item.name, item)
        candidates: list[Candidate] = []
        accepted: list[tuple[Recipe, dict[str, Any]]] = []
        for item in sorted(seen.values(), key=_NAME):
            try:
                reason, chosen = _match(item.name, item.tags, item.variations, positive, negative)
            except ResolveError:
                decision.candidates.extend(candidates)
                raise
            candidates.append(Candidate(item.name, item.source, reason is None, reason or "all tags match"))
            if reason is None:
                accepted.append((catalog.build(item), chosen))
        shadowed = catalog.shadowed_listed
        for name, winner in seen.items():
            for shadow in shadowed.get(name, ()):
                candidates.append(Candidate(shadow.name, shadow.source, False,
                                            f"shadowed by {winner.source} ({PurePath(winner.path)})"))
        return _Selection(seen, tuple(candidates), tuple(accepted))

    # -- variations -----------------------------------------------------------------------

    def _variations(self, recipe: Recipe, chosen: dict[str, Any], decision: Decision, scanned: RecipeScan
                    ) -> tuple[dict[str, Any], dict[str, str | None]]:
        groups: dict[str, str | None] = dict.fromkeys(scanned.groups)
        for name, value in chosen.items():
            var = recipe.variations[_var_key(recipe, name)]
            shown = name if value is True else f"{name}.{value}"
            decision.variations.append((shown, "selected by a query tag"))
            if var.group:
                if groups[var.group] is not None:
                    raise ResolveError(
                        f"conflicting variations '{groups[var.group]}' and '{name}' of group "
                        f"'{var.group}' in recipe {recipe.name}: choose one"
                    )
                groups[var.group] = name
        selected = dict(chosen)
        for var in scanned.default_variations:
            if var.group and groups[var.group] is None:
                groups[var.group] = var.name
                selected[var.name] = True
                decision.variations.append((var.name, f"default of group '{var.group}'"))
            elif not var.group and var.name not in selected:
                selected[var.name] = True
                decision.variations.append((var.name, "default (ungrouped)"))
        if len(selected) < 2:
            return selected, groups
        order = scanned.order
        ordered = sorted(selected.items(), key=lambda kv: order[_var_key(recipe, kv[0])])
        return dict(ordered), groups

    # -- inputs ---------------------------------------------------------------------------

    def _inputs(self, recipe: Recipe, variations: Mapping[str, Any], raw: Mapping[str, Any],
                origin: str, scanned: RecipeScan) -> dict[str, Any]:
        if scanned.defaults is not None:
            values = dict(scanned.defaults)
        else:
            values = {n: s.coerce(s.default, f"{recipe.path}: inputs.{n}.default")
                      for n, s in recipe.inputs.items() if s.default is not None}
            if fixed_defaults(recipe, values):
                scanned.defaults = dict(values)
        forced: dict[str, tuple[Any, str]] = {}
        for name, value in variations.items():
            var = recipe.variations[_var_key(recipe, name)]
            for key, forced_value in var.inputs.items():
                if forced_value == "#":
                    forced_value = value
                spec = recipe.inputs[key]
                forced[key] = (spec.coerce(forced_value, f"variation '{name}' of {recipe.name}"), name)
        values.update({k: v for k, (v, _) in forced.items()})
        if origin == COMMAND_LINE:
            raw = fold_env_args(recipe, raw, self.step_lookup)
        for key, value in raw.items():
            given = recipe.inputs.get(key)
            if given is None:
                raise UsageError(unknown_input(key, recipe.name, recipe.inputs, origin))
            typed = given.coerce(value, origin)
            if key in forced and forced[key][0] != typed:
                raise ResolveError(
                    f"{origin}: input '{key}' = {typed!r} conflicts with variation "
                    f"'{forced[key][1]}' of {recipe.name}, which sets {forced[key][0]!r}"
                )
            values[key] = typed
        for name, spec in recipe.inputs.items():
            if spec.required and values.get(name) is None:
                raise UsageError(_missing_input(recipe, name, spec.type, origin))
            if spec.type == "path" and values.get(name) is not None:
                values[name] = os.path.abspath(values[name])  # steps run in their own directory
        return dict(sorted(values.items()))

    # -- conditions, requires, deps, steps ------------------------------------------------

    def _context(self, inputs: Mapping[str, Any], groups: Mapping[str, str | None],
                 variations: Mapping[str, Any], used: dict[str, Any]) -> dict[str, Any]:
        return {"inputs": inputs, "variation": groups, "variations": list(variations),
                "facts": _RecordingFacts(self.facts, used)}

    def _check_requires(self, recipe: Recipe, variations: Mapping[str, Any], used: dict[str, Any]) -> dict[str, Any]:
        combined: dict[str, Any] = dict(recipe.requires)
        required_by: dict[str, str] = {}
        for name in variations:
            spec = recipe.variations[_var_key(recipe, name)]
            combined.update(spec.requires)
            required_by.update(dict.fromkeys(spec.requires, spec.name))
        for key, expected in combined.items():
            self.facts.check_requirement(key.split(".")[0], expected, f"{recipe.path}: requires.{key}")
            have = _fact_path(self.facts, key)
            used[key] = have
            if not _satisfies(have, expected, f"{recipe.path}: requires.{key}"):
                where = f" (facts from {self.facts.source})" if self.facts.source != "local" else ""
                raise ResolveError(
                    f"recipe {recipe.name} requires {key} {_show(expected)}; this machine has: {_show(have)}{where}"
                    f"{requirement_next_step(recipe, required_by.get(key), self.facts.source != 'local')}"
                )
        return combined

    def _deps(self, recipe: Recipe, specs: list[DepSpec], context: dict[str, Any],
              path: Path, decision: Decision, scope: Scope
              ) -> Generator[_Need, str, tuple[dict[str, str], dict[str, str]]]:
        """The deps in the plan (alias -> node id) and those a false ``when`` left out
        (alias -> why), for the template checks."""
        deps: dict[str, str] = {}
        skipped: dict[str, str] = {}
        file = str(recipe.path)  # formatted once per node, not per dep
        for dep in specs:
            where = f"{file}: {dep.origin}.{dep.index}"
            if dep.when and not self._condition(recipe, dep.when, context, (*_keypath(dep), "when")):
                decision.skipped.append((dep.alias, f"when: {dep.when} is false"))
                skipped[dep.alias] = f"its when: {dep.when} is false"
                continue
            if dep.alias in deps:
                raise ResolveError(f"{where}: alias '{dep.alias}' is used by two deps; set 'as:'")
            raw: Mapping[str, Any] = {}
            if dep.with_:
                check_dep_templates(recipe, dep.with_, (*_keypath(dep), "with"), scope)
                raw = render_value(dep.with_, context, f"{where}.with")
            tags = self._cached_first(dep, decision) if dep.cached_alternatives else dep.tags
            node_id = yield _Need(tags, raw, f"{where}.with", path, dep.version, where, (recipe, _keypath(dep)))
            deps[dep.alias] = node_id
        return deps, {alias: why for alias, why in skipped.items() if alias not in deps}

    def _cached_first(self, dep: DepSpec, decision: Decision) -> tuple[str, ...]:
        """``dep.tags``, or the first of its ``cached_alternatives`` whose recipe has a valid
        cache entry where the recipe of ``dep.tags`` has none (without a cache: ``dep.tags``).
        An alternative that selects no recipe, or several, is passed over."""
        options = (dep.tags, *dep.cached_alternatives)
        names: dict[tuple[str, ...], str] = {}
        for tags in options:
            with suppress(ResolveError):
                names[tags] = self._select(tags, Decision(tags, None), dep.version)[0].name
        cached = self.cached(names.values()) if self.cached is not None and names else frozenset()
        chosen = next((tags for tags in options if names.get(tags) in cached), dep.tags)
        others = ", ".join(names.get(t, f"{','.join(t)} (no one recipe)") for t in options if t != chosen)
        if self.cached is None:
            why = f"tags {','.join(chosen)} (no cache to look in; not {others})"
        elif chosen == dep.tags:
            state = "in the cache" if names.get(chosen) in cached else "none of them in the cache"
            why = f"tags {','.join(chosen)} ({state}; not {others})"
        else:
            why = f"tags {','.join(chosen)}: {names[chosen]} is in the cache and {names.get(dep.tags, 'the first')} " \
                  f"is not (a cached alternative is taken first, as CM takes a cached script; not {others})"
        decision.chosen.append((dep.alias, why))
        return chosen

    def _steps(self, recipe: Recipe, context: dict[str, Any], decision: Decision,
               used: dict[str, Any], scope: Scope, scanned: RecipeScan) -> tuple[StepSpec, ...]:
        """The steps whose ``when`` holds, each checked against its step type, and every
        template of the node checked against what it will be able to read."""
        steps = recipe.steps
        kept_at = [at for at, step in enumerate(steps) if self._keep(recipe, step, at, context, decision, scanned)]
        kept = tuple(steps[at] for at in kept_at)
        check_node_templates(recipe, scope, tuple(step.id for step in kept), scanned.templates,
                             scanned.output_templates)
        check_node_bounds(recipe, [*(scanned.templates[at] for at in kept_at),
                                   *(found for _name, found in scanned.output_templates)], context)
        for step in kept:
            self._check_plan(recipe, step)
        get = self.facts.get
        for at in kept_at:
            for name in scanned.facts[at]:
                used[name] = get(name)
        for names in scanned.output_facts:
            for name in names:
                used[name] = get(name)
        return kept

    def _keep(self, recipe: Recipe, step: StepSpec, at: int, context: dict[str, Any], decision: Decision,
              scanned: RecipeScan) -> bool:
        if step.when and not self._condition(recipe, step.when, context, ("steps", step.index, "when")):
            decision.skipped.append((f"step {step.id}", f"when: {step.when} is false"))
            return False
        self._check_step_type(recipe, step, at, scanned)
        return True

    def _check_step_type(self, recipe: Recipe, step: StepSpec, at: int, scanned: RecipeScan) -> None:
        """The step's type exists and its ``with:`` fits the type's parameters and schema
        (checked once per recipe step and step type: neither depends on the node)."""
        if self.step_lookup is None:
            return
        try:
            step_type: StepType = self.step_lookup(step.uses)
        except CmxError as exc:
            line = line_of(recipe.path, ("steps", step.index, "uses"))
            raise type(exc)(f"{recipe.path}:{line}: steps.{step.index}.uses: {exc}") from None
        if scanned.passed.get(at) is step_type:
            return
        if step_type.params:
            for key in step.with_:
                if key not in step_type.params:
                    known = ", ".join(sorted(step_type.params))
                    line = line_of(recipe.path, ("steps", step.index, "with", key))
                    raise ResolveError(
                        f"{recipe.path}:{line}: steps.{step.index}.with.{key}: unknown parameter of "
                        f"step type '{step.uses}' (expected one of: {known})"
                    )
        check_step_params(recipe, step, step_type)
        scanned.passed[at] = step_type

    def _check_plan(self, recipe: Recipe, step: StepSpec) -> None:
        """The step type's own plan-time check (a ``python`` step's function exists), after
        the templates' checks: it may look at files, so it comes last."""
        if self.step_lookup is None:
            return
        step_type = self.step_lookup(step.uses)
        if step_type.check_plan is None:
            return
        problem = step_type.check_plan(step.with_, recipe.path.parent)
        if problem is not None:
            key, message = problem
            line = line_of(recipe.path, ("steps", step.index, "with", key))
            raise ResolveError(f"{recipe.path}:{line}: steps.{step.index}.with.{key}: {message}")

    def _condition(self, recipe: Recipe, text: str, context: dict[str, Any], keypath: tuple[Any, ...]) -> bool:
        used = context["facts"].used

        def record(path: tuple[str, ...], value: Any) -> None:
            if path[0] == "facts" and len(path) > 1:  # only the part read goes into the key
                used[".".join(path[1:])] = None if value is MISSING else value

        try:
            return bool(compile_expression(text).evaluate(context, on_path=record))
        except ExpressionError as exc:
            path_key = tuple(int(k) if isinstance(k, str) and k.isdigit() else k for k in keypath)
            line = line_of(recipe.path, path_key)
            raise ResolveError(f"{recipe.path}:{line}: {'.'.join(map(str, keypath))}: {exc}") from None


class _RecordingFacts:
    """The ``facts`` name in conditions and templates. Conditions record the dotted paths
    they read (see ``_condition``); a template reading ``facts.X`` records all of fact X."""

    __slots__ = ("_store", "used")

    def __init__(self, store: FactStore, used: dict[str, Any]) -> None:
        self._store = store
        self.used = used

    def get_path(self, name: str) -> Any:
        try:
            return self._store.get(name)
        except ResolveError as exc:
            raise ExpressionError(str(exc)) from None

    def __getitem__(self, name: str) -> Any:
        """Jinja2 reads ``facts.os`` through item access."""
        try:
            value = self.get_path(name)
        except ExpressionError as exc:
            raise KeyError(str(exc)) from None
        self.used[name] = value
        return value


_EMPTY = (dict, ())


def _frozen(value: Any) -> Any:
    """A hashable form of a plain value that tells apart what canonical JSON tells apart
    (``1``, ``1.0`` and ``true`` are three values), cheaper than dumping it."""
    kind = value.__class__
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return (kind, value)
    if kind is dict and not value:
        return _EMPTY
    if isinstance(value, Mapping):
        return (dict, tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (list, tuple(_frozen(v) for v in value))
    return (str, str(value))  # as JSON's default=str writes it


def _dep_specs(recipe: Recipe, variations: Mapping[str, Any]) -> list[DepSpec]:
    """The recipe's deps, then those of its selected variations."""
    specs: list[DepSpec] = list(recipe.deps)
    for name in variations:
        specs.extend(recipe.variations[_var_key(recipe, name)].deps)
    return specs


def _missing_input(recipe: Recipe, name: str, kind: str, origin: str) -> str:
    if origin == "--input":
        flag = f"--input.{name}" if name in reserved else f"--{name}"
        return f"recipe {recipe.name} needs input '{name}' ({kind}): pass {flag}=VALUE"
    return f"{origin}: the dep's recipe {recipe.name} needs input '{name}' ({kind}); pass it in the dep's with:"


def _keypath(dep: DepSpec) -> tuple[str | int, ...]:
    """Where a dep is in its recipe file (``("deps", 0)``, ``("variations", "x", "deps", 1)``)."""
    return (*dep.origin.split("."), dep.index)


def _var_key(recipe: Recipe, selected: str) -> str:
    """The variation spec name for a selected name (``batch_size.#`` for ``batch_size``)."""
    return selected if selected in recipe.variations else f"{selected}.#"


def _match(name: str, tags: Collection[str], variations: Collection[str], positive: list[str],
           negative: set[str], hint: bool = False) -> tuple[str | None, dict[str, Any]]:
    """Why recipe ``name`` does not match the tags (None if it does) and the variations chosen,
    from its ``tags`` and ``variations`` (names) as the catalog lists them: a candidate is
    matched without building it. ``hint`` adds a did-you-mean (difflib: too slow for every
    candidate of a common tag)."""
    excluded = negative.intersection(tags) if negative else None
    if excluded:
        return f"has excluded tag '{min(excluded)}'", {}
    chosen: dict[str, Any] = {}
    for tag in positive:
        if tag in tags:
            continue
        var = _variation_for(variations, tag)
        if var is None:
            close = did_you_mean(tag, (*tags, *_variation_tags(variations))) if hint else ""
            return f"lacks tag '{tag}' (neither a tag nor a variation of it{close})", {}
        key, value = var
        if key in chosen and chosen[key] != value:
            raise ResolveError(f"tags give variation '{key}' of {name} two values: {chosen[key]} and {value}")
        chosen[key] = value
    return None, chosen


def _with_hints(candidates: list[Candidate], seen: Mapping[str, Listed], positive: list[str],
                negative: set[str], shown: int = 6) -> list[Candidate]:
    """The candidates with a did-you-mean added to the first ``shown`` tag rejections (the
    ones a selection error prints)."""
    out: list[Candidate] = []
    for cand in candidates:
        item = seen.get(cand.name)
        if shown and item is not None and item.source == cand.source and cand.reason.startswith("lacks tag"):
            hinted = _match(item.name, item.tags, item.variations, positive, negative, hint=True)[0]
            cand = cand._replace(reason=hinted or cand.reason)
            shown -= 1
        out.append(cand)
    return out


def _variation_for(variations: Collection[str], tag: str) -> tuple[str, Any] | None:
    """The variation ``tag`` selects (name, value) among ``variations`` (their names)."""
    if tag in variations and not tag.endswith(".#"):  # a parametric one is selected as stem.value
        return tag, True
    stem, _, value = tag.partition(".")  # stems have no dots; values may (lr.0.01, v.1.2.3)
    if stem and value and f"{stem}.#" in variations:
        return stem, value
    return None


def _variation_tags(variations: Collection[str]) -> list[str]:
    """The tags that select a variation: its name, or ``stem.`` for a parametric one."""
    return [name[:-1] if name.endswith(".#") else name for name in variations]


def _selection_error(tags: tuple[str, ...], accepted: list[tuple[Recipe, dict[str, Any]]],
                     candidates: list[Candidate], catalog: Catalog | None = None, hint: str = "") -> str:
    query = ",".join(tags)
    if accepted:
        names = "; ".join(f"{r.name} ({r.path}): {_why_accepted(r, chosen)}" for r, chosen in accepted)
        return f"tags '{query}' match {len(accepted)} recipes: {names}; add a tag that tells them apart"
    rejected = [c for c in candidates if not c.accepted]
    if not rejected:
        known = [t for item in catalog.listed.values() for t in item.tags] if catalog is not None else []
        hints = "".join(did_you_mean(t.lstrip("_"), known) for t in tags if not t.startswith("-"))
        if catalog is not None and len(tags) == 1:  # perhaps a misspelt name: cmx run NAME
            hints += did_you_mean(tags[0], catalog.listed, n=1).replace("did you mean", "or the recipe")
        return f"no recipe has any of the tags '{query}'{hints}{hint} (see 'cmx list recipes')"
    shown = "; ".join(f"{c.name}: {c.reason}" for c in rejected[:6])
    more = f"; and {len(rejected) - 6} more" if len(rejected) > 6 else ""
    return (f"no recipe matches tags '{query}'{hint}; candidates: {shown}{more} "
            f"(run 'cmx explain --tags={query}')")


def _why_accepted(recipe: Recipe, chosen: Mapping[str, Any]) -> str:
    """Why an ambiguous candidate matched: its extra tags and the variations the query chose."""
    parts = [f"variation {n}" if v is True else f"variation {n}.{v}" for n, v in chosen.items()]
    parts.append("has tags " + ",".join(recipe.tags))
    return "; ".join(parts) if len(parts) > 1 else parts[0]


def requirement_next_step(recipe: Recipe, variation: str | None, from_file: bool) -> str:
    """What to do about a requirement this machine misses: plan for a machine that has it
    (``--facts FILE``), or drop the variation that asks for it, naming what is then used."""
    plan = "" if from_file else "; to plan for such a machine, give its facts: cmx plan ... --facts FILE"
    if variation is None:
        return plan
    spec = recipe.variations[_var_key(recipe, variation)]
    members = recipe.groups().get(spec.group or "", []) if spec.group else []
    fallback = next((m.name for m in members if m.default and m.name != spec.name), None)
    instead = f" with its default '{fallback}'" if fallback else ""
    return f"{plan}; or drop '{variation}' from the tags to run here{instead}" if plan else \
        f"; or drop '{variation}' from the tags to plan{instead}"


def _fact_path(store: FactStore, dotted: str) -> Any:
    """A dotted fact path, list indexes allowed (``gpus.devices[0].memory_total_bytes``)."""
    name, *rest = dotted.split(".")
    value = requirements.lookup(store.get(name), rest)
    return None if value is requirements.MISSING else value


def _satisfies(have: Any, expected: Any, where: str) -> bool:
    """Equality, version prefixes, version ranges and numeric bounds: see :mod:`cmx_core.resolve.requirements`."""
    return requirements.satisfied(have, expected, where)


def _show(value: Any) -> str:
    if value in (None, [], "", MISSING):
        return "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)
