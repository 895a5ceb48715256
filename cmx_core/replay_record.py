"""Write the warm-run memo after a ``cmx run`` whose every node was a valid cache hit.

The memo lists everything that run's outcome depended on — the invocation, the plugin set,
every file of every recipe source and where each source directory points, the cache entries
and the paths they record, each fact's cache file, fingerprint function and deadline, the
variables steps let through, the source of the cmx and plugin modules the run loaded —
together with the documents it wrote. :mod:`cmx_core.replay` checks all of it again in a
fresh process and, when nothing changed, writes the same run again (new run id and times)
without loading the plugin system. Anything that cannot be checked that way (a fact from a
detector whose functions cannot be found by name, a third-party event hook, a step
validator defined in a closure, ``--facts``, ``--no-cache``...) or that changed while the
run went on means no memo, never a wrong replay. The memo is signed (see
:func:`cmx_core.replay.signing_key`), so a file planted in a shared cache is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.datautil import digest, thaw
from cmx_core.hookspecs import hookimpl
from cmx_core.refs import reference
from cmx_core.replay import MEMO_FORMAT, file_state, memo_path, signing_key

if TYPE_CHECKING:
    from cmx_core.catalog import Source
    from cmx_core.engine import RunResult, Session
    from cmx_core.planner import PlanNode

EVENT_HOOKS = ("cmx_node_started", "cmx_node_finished", "cmx_result_written")
OWN_OBSERVERS = {"cmx-progress", "cmx-replay-observer"}
"""Event-hook implementers whose effect the replay reproduces itself."""


class NotReplayable(Exception):
    """Why a run gets no memo (only reported with ``-v``)."""


class Recorder:
    """Watches one ``cmx run`` (which nodes came from the cache, with which outputs; the
    recipe sources before it started) and then writes its memo.

    Registered as a plugin named ``cmx-replay-observer`` for the duration of the run."""

    def __init__(self, argv: list[str], key: str, recipes_args: list[str], *, json_output: bool,
                 verbose: bool) -> None:
        self.argv = list(argv)
        self.key = key
        self.recipes_args = list(recipes_args)
        self.json_output = json_output
        self.verbose = verbose
        self.finished: dict[str, str | None] = {}
        self.sources_before: list[list[Any]] = []

    def __enter__(self) -> Recorder:
        from cmx_core.catalog import default_sources
        from cmx_core.engine import resolve_recipes_dirs
        from cmx_core.plugins import get_registry

        try:
            self.sources_before = _recipe_files(default_sources(resolve_recipes_dirs(self.recipes_args),
                                                                get_registry().recipe_paths))
        except Exception:  # noqa: BLE001 - bad --recipes etc.: the run itself reports it
            self.sources_before = []
        get_registry().manager.register(self, name="cmx-replay-observer")
        return self

    def __exit__(self, *exc: object) -> None:
        from cmx_core.plugins import get_registry

        manager = get_registry().manager
        if manager.is_registered(self):
            manager.unregister(self)

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Any, wall_s: float, cached: bool) -> None:
        self.finished[node_id] = digest(thaw(outputs)) if cached else None

    def remember(self, result: RunResult) -> None:
        """Write the memo, or (with ``-v``) say why this run cannot be replayed."""
        import sys

        if result.session is None:
            return
        try:
            self._write(result, result.session)
        except NotReplayable as why:
            if self.verbose:
                print(f"cmx: no warm-run memo: {why}", file=sys.stderr)
        except OSError as exc:  # a read-only cache: the memo is only an optimisation
            if self.verbose:
                print(f"cmx: no warm-run memo: cannot write it ({exc.strerror or exc})", file=sys.stderr)
        else:
            if self.verbose:
                print(f"cmx: warm-run memo {self.key[:12]} written; an identical run replays it", file=sys.stderr)

    def _write(self, result: RunResult, session: Session) -> None:
        nodes = result.plan.nodes
        if any(self.finished.get(n.id) is None for n in nodes):
            raise NotReplayable("not every node was a cache hit")
        if not session.registry.from_entry_points:
            raise NotReplayable("the plugins were not loaded from entry points alone")
        _check_events(session)
        from cmx_core.catalog import default_sources

        sources = default_sources(session.recipes_dirs, session.registry.recipe_paths)
        recipe_files = _recipe_files(sources)
        if recipe_files != self.sources_before:
            raise NotReplayable("a recipe file changed while the run went on")
        entries = [_entry(node, self.finished[node.id]) for node in nodes]
        fact_files, fact_deadlines = _fact_caches(session)
        memo = {
            "format": MEMO_FORMAT,
            "key": self.key,
            "argv": self.argv,
            "json": self.json_output,
            "verbose": self.verbose,
            "discovery": _discovery(),
            "nodes": [n.id for n in nodes],
            "recipe": result.plan.root.recipe.name,
            "links": _links(self.recipes_args, sources),
            "files": recipe_files + [_shipped_recipes()] + [f for e in entries for f in e[0]]
            + fact_files + _code_files(session),
            "env": {k: v for node in nodes for k, v in node.key_values.get("env", {}).items()},
            "deadline": min([d for e in entries if (d := e[1]) is not None] + fact_deadlines, default=None),
            "facts": _facts(session),
            "validators": [v for node in nodes for v in _validators(node, session)],
            "plan_json": (result.run_dir / "plan.json").read_text(encoding="utf-8"),
            "lock_json": (result.run_dir / "lock.json").read_text(encoding="utf-8"),
            "document": result.document,
        }
        written = json.dumps([memo["plan_json"], memo["lock_json"],
                              {k: v for k, v in result.document.items() if k != "run_id"}])
        if result.run_id in written or str(result.run_dir) in written:
            raise NotReplayable("the run's own id or directory appears in what it wrote")
        body = json.dumps(memo)  # key order kept: the replayed result.json is the same text
        import hmac

        from cmx_core.datautil import atomic_write

        signature = hmac.new(signing_key(create=True), body.encode(), "sha256").hexdigest()
        atomic_write(memo_path(self.key), f"{signature}\n{body}")


def _links(recipes_args: list[str], sources: list[Source]) -> list[list[str]]:
    """Each recipe directory as configured (``--recipes``, ``CMX_RECIPES_PATH``, plugins,
    core) and where it really is: a re-pointed symlink changes what resolves without
    changing any file the memo lists."""
    configured = list(recipes_args) + [d for d in os.environ.get("CMX_RECIPES_PATH", "").split(os.pathsep) if d]
    configured += [str(s.directory) for s in sources]
    return [[path, os.path.realpath(os.path.expanduser(path))] for path in dict.fromkeys(configured)]


def _shipped_recipes() -> list[Any]:
    """``cmx_core/recipes`` (present in a wheel, absent in a checkout): if it appears or
    goes, the core collection moves (see :func:`cmx_core.catalog.core_recipes_dir`)."""
    return file_state(str(Path(__file__).resolve().parent / "recipes"))


def _discovery() -> list[str]:
    from cmx_core.command_index import discovery_fingerprint

    return discovery_fingerprint()


def _recipe_files(sources: list[Source]) -> list[list[Any]]:
    """Every directory and recipe file below every recipe source, as the catalog sees them
    (an added, removed or changed file changes what resolves)."""
    from cmx_core.catalog import SUFFIXES

    states: list[list[Any]] = []
    for source in sources:
        top = str(source.directory)
        states.append(file_state(top))
        visited: set[tuple[int, int]] = set()
        for root, dirs, files in os.walk(top, followlinks=True):
            st = os.stat(root)
            if (st.st_dev, st.st_ino) in visited:
                dirs[:] = []
                continue
            visited.add((st.st_dev, st.st_ino))
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            states.extend(file_state(os.path.join(root, d)) for d in dirs)
            states.extend(file_state(os.path.join(root, f)) for f in sorted(files)
                          if f.endswith(SUFFIXES) and not f.startswith("."))
    return states


def _entry(node: PlanNode, outputs_digest: str | None) -> tuple[list[list[Any]], float | None]:
    """The file states a node's hit depends on (its entry's metadata, the paths the entry
    recorded, its ``path`` inputs) and the entry's expiry; NotReplayable when the entry or
    an input is no longer what the run used."""
    from cmx_core.cache import META, Cache

    expires = node.recipe.cache.expires_s
    entry, why = Cache().lookup(node.cache_key, expires)
    if entry is None:
        raise NotReplayable(f"{node.id}: {why}")
    if digest(entry.outputs) != outputs_digest:
        raise NotReplayable(f"{node.id}: its cache entry was replaced while the run went on")
    states = [file_state(str(entry.path / META))] + [file_state(path) for path in entry.meta.get("paths", {})]
    used = node.key_values.get("paths", {})
    for name, spec in node.recipe.inputs.items():  # a path input's file, present or not
        value = node.inputs.get(name)
        if spec.type == "path" and isinstance(value, str):
            state = file_state(value)
            if (state[1:] if state[1] is not None else None) != used.get(name):
                raise NotReplayable(f"{node.id}: input {name} ({value}) changed while the run went on")
            states.append(state)
    deadline = float(entry.meta.get("created", 0)) + float(expires) if expires is not None else None
    return states, deadline


def _code_files(session: Session) -> list[list[Any]]:
    """The source of every module of cmx-core and of the plugins that this run loaded: an
    edited checkout (an editable install keeps its version) must not replay old code."""
    import sys

    packages = {"cmx_core"} | {info.module.partition(".")[0] for info in session.registry.plugins.values()}
    files = {getattr(module, "__file__", None) for name, module in list(sys.modules.items())
             if name.partition(".")[0] in packages}
    return [file_state(path) for path in sorted(f for f in files if isinstance(f, str))]


def _facts(session: Session) -> list[dict[str, Any]]:
    """For a cached fact: its fingerprint function and value; else its detect function and
    the digest of the value it returned."""
    store = session.facts
    if store.file_facts is not None:
        raise NotReplayable("facts come from a facts file")
    if store.errors:
        raise NotReplayable(f"detector {next(iter(store.errors))} failed")
    facts = []
    for name, (detector, fingerprint, value) in sorted(store.used.items()):
        if detector.ttl_s:
            ref = reference(detector.fingerprint) if detector.fingerprint else None
            if detector.fingerprint is not None and ref is None:
                raise NotReplayable(f"fact {name}: fingerprint function cannot be found by name")
            if fingerprint.startswith("error:"):
                raise NotReplayable(f"fact {name}: fingerprint failed")
            facts.append({"name": name, "fingerprint_ref": ref, "fingerprint": fingerprint})
        else:
            ref = reference(detector.detect)
            if ref is None:
                raise NotReplayable(f"fact {name}: detect function cannot be found by name")
            facts.append({"name": name, "detect_ref": ref, "digest": digest(value)})
    return facts


def _fact_caches(session: Session) -> tuple[list[list[Any]], list[float]]:
    """The state of each cached fact's file and when the fact expires; NotReplayable if a
    file no longer holds the value the run used (another process re-detected it meanwhile)."""
    from cmx_core.facts import fact_cache_file

    states, deadlines = [], []
    for name, (detector, fingerprint, value) in sorted(session.facts.used.items()):
        if not detector.ttl_s:
            continue
        path = fact_cache_file(name)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise NotReplayable(f"fact {name}: cache file unreadable") from exc
        if not isinstance(record, dict) or record.get("fingerprint") != fingerprint \
                or digest(record.get("value")) != digest(value):
            raise NotReplayable(f"fact {name}: its cache file changed while the run went on")
        states.append(file_state(str(path)))
        deadlines.append(float(record.get("created", 0)) + float(detector.ttl_s))
    return states, deadlines


def _validators(node: PlanNode, session: Session) -> list[dict[str, Any]]:
    """Step validators the replay must call again on the node's entry."""
    from cmx_core.cache import META, Cache

    found = []
    for step in node.steps:
        step_type = session.registry.steps.get(step.uses)
        if step_type is None or step_type.validate is None:
            continue
        ref = reference(step_type.validate)
        if ref is None:
            raise NotReplayable(f"step type {step.uses}: validator cannot be found by name")
        found.append({"step": step.uses, "ref": ref, "meta": str(Cache().entry_dir(node.cache_key) / META)})
    return found


def _check_events(session: Session) -> None:
    for name in EVENT_HOOKS:
        for impl in getattr(session.registry.hook, name).get_hookimpls():
            if impl.plugin_name not in OWN_OBSERVERS:
                raise NotReplayable(f"plugin {impl.plugin_name} observes {name}")

