"""Write the warm-run memo after a ``cmx run`` whose every node was a valid cache hit.

The memo lists everything that run's outcome depended on — the invocation, the plugin set,
every file of every recipe source, the cache entries and the paths they record, each fact's
cache file, fingerprint function and deadline, the variables steps let through — together
with the documents it wrote. :mod:`cmx_core.replay` checks all of it again in a fresh
process and, when nothing changed, writes the same run again (new run id and times) without
loading the plugin system. Anything that cannot be checked that way (a fact from a detector
whose functions cannot be found by name, a third-party event hook, a step validator defined
in a closure, ``--facts``, ``--no-cache``...) means no memo, never a wrong replay.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from cmx_core.hookspecs import hookimpl
from cmx_core.refs import reference
from cmx_core.replay import MEMO_FORMAT, file_state, invocation_key, memo_path

if TYPE_CHECKING:
    from cmx_core.engine import RunResult, Session

EVENT_HOOKS = ("cmx_node_started", "cmx_node_finished", "cmx_result_written")
OWN_OBSERVERS = {"cmx-progress", "cmx-replay-observer"}
"""Event-hook implementers whose effect the replay reproduces itself."""


class NotReplayable(Exception):
    """Why a run gets no memo (only reported with ``-v``)."""


class Recorder:
    """Watches one ``cmx run`` (which nodes came from the cache) and then writes its memo.

    Registered as a plugin named ``cmx-replay-observer`` for the duration of the run."""

    def __init__(self, argv: list[str], *, json_output: bool, verbose: bool) -> None:
        self.argv = list(argv)
        self.json_output = json_output
        self.verbose = verbose
        self.finished: dict[str, bool] = {}

    def __enter__(self) -> Recorder:
        from cmx_core.plugins import get_registry

        get_registry().manager.register(self, name="cmx-replay-observer")
        return self

    def __exit__(self, *exc: object) -> None:
        from cmx_core.plugins import get_registry

        manager = get_registry().manager
        if manager.is_registered(self):
            manager.unregister(self)

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Any, wall_s: float, cached: bool) -> None:
        self.finished[node_id] = cached

    def remember(self, result: RunResult) -> None:
        """Write the memo, or (with ``-v``) say why this run cannot be replayed."""
        import sys

        if result.session is None:
            return
        try:
            key = remember(self.argv, result, result.session, self.finished,
                           json_output=self.json_output, verbose=self.verbose)
        except NotReplayable as why:
            if self.verbose:
                print(f"cmx: no warm-run memo: {why}", file=sys.stderr)
        except OSError as exc:
            print(f"cmx: warning: cannot write the warm-run memo: {exc}", file=sys.stderr)
        else:
            if self.verbose:
                print(f"cmx: warm-run memo {key[:12]} written; an identical run replays it", file=sys.stderr)


def remember(argv: list[str], result: RunResult, session: Session, finished: dict[str, bool],
             *, json_output: bool, verbose: bool) -> str:
    """Write the memo of ``result``; returns its key. Raises :class:`NotReplayable`."""
    nodes = result.plan.nodes
    if any(not finished.get(n.id, False) for n in nodes):
        raise NotReplayable("not every node was a cache hit")
    if not session.registry.from_entry_points:
        raise NotReplayable("the plugins were not loaded from entry points alone")
    key = invocation_key(argv)
    memo = {
        "format": MEMO_FORMAT,
        "key": key,
        "argv": argv,
        "json": json_output,
        "verbose": verbose,
        "discovery": _discovery(),
        "nodes": [n.id for n in nodes],
        "recipe": result.plan.root.recipe.name,
        "files": _recipe_files(session) + _entry_files(result) + _fact_files(session) + _code_files(session),
        "env": _env(result),
        "deadline": min(_entry_deadlines(result) + _fact_deadlines(session), default=None),
        "facts": _facts(session),
        "validators": _validators(result, session),
        "plan_json": _read(result.run_dir / "plan.json"),
        "lock_json": _read(result.run_dir / "lock.json"),
        "document": result.document,
    }
    _check_events(session)
    text = json.dumps(memo, sort_keys=True)
    for marker in (result.run_id, str(result.run_dir)):
        if marker in json.dumps([memo["plan_json"], memo["lock_json"]]) or \
                marker in json.dumps({k: v for k, v in result.document.items() if k not in ("run_id",)}):
            raise NotReplayable("the run's own id or directory appears in what it wrote")
    from cmx_core.datautil import atomic_write

    atomic_write(memo_path(key), text)
    return key


def _discovery() -> list[str]:
    from cmx_core.command_index import discovery_fingerprint

    return discovery_fingerprint()


def _recipe_files(session: Session) -> list[list[Any]]:
    """Every directory and recipe file below every recipe source, as the catalog sees them
    (an added, removed or changed file changes what resolves)."""
    from cmx_core.catalog import SUFFIXES, default_sources

    states: list[list[Any]] = []
    for source in default_sources(session.recipes_dirs):
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


def _code_files(session: Session) -> list[list[Any]]:
    """The source of every module of cmx-core and of the plugins that this run loaded: an
    edited checkout (an editable install keeps its version) must not replay old code."""
    import sys

    packages = {"cmx_core"} | {info.module.partition(".")[0] for info in session.registry.plugins.values()}
    files = {getattr(module, "__file__", None) for name, module in list(sys.modules.items())
             if name.partition(".")[0] in packages}
    return [file_state(path) for path in sorted(f for f in files if isinstance(f, str))]


def _entry_files(result: RunResult) -> list[list[Any]]:
    """Each node's cache entry metadata and the paths it recorded."""
    from cmx_core.cache import META, Cache

    cache = Cache()
    states: list[list[Any]] = []
    for node in result.plan.nodes:
        entry, why = cache.lookup(node.cache_key, node.recipe.cache.expires_s)
        if entry is None:
            raise NotReplayable(f"{node.id}: {why}")
        states.append(file_state(str(entry.path / META)))
        for path in entry.meta.get("paths", {}):
            states.append(file_state(path))
        for name, spec in node.recipe.inputs.items():  # a path input's file, present or not
            value = node.inputs.get(name)
            if spec.type == "path" and isinstance(value, str):
                states.append(file_state(value))
    return states


def _entry_deadlines(result: RunResult) -> list[float]:
    from cmx_core.cache import Cache

    cache = Cache()
    deadlines = []
    for node in result.plan.nodes:
        expires = node.recipe.cache.expires_s
        if expires is not None:
            entry, _ = cache.lookup(node.cache_key, expires)
            if entry is None:
                raise NotReplayable(f"{node.id}: entry vanished")
            deadlines.append(float(entry.meta.get("created", 0)) + float(expires))
    return deadlines


def _env(result: RunResult) -> dict[str, str | None]:
    env: dict[str, str | None] = {}
    for node in result.plan.nodes:
        env.update(node.key_values.get("env", {}))
    return env


def _facts(session: Session) -> list[dict[str, Any]]:
    """For a cached fact: its fingerprint function and value; else its detect function and
    the digest of the value it returned."""
    store = session.facts
    if store.file_facts is not None:
        raise NotReplayable("facts come from a facts file")
    if store.errors:
        raise NotReplayable(f"detector {next(iter(store.errors))} failed")
    facts = []
    for name, (detector, fingerprint) in sorted(store.used.items()):
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
            from cmx_core.replay import value_digest

            facts.append({"name": name, "detect_ref": ref, "digest": value_digest(store.get(name))})
    return facts


def _fact_files(session: Session) -> list[list[Any]]:
    from cmx_core.facts import fact_cache_file

    return [file_state(str(fact_cache_file(name))) for name, (d, _) in sorted(session.facts.used.items()) if d.ttl_s]


def _fact_deadlines(session: Session) -> list[float]:
    from cmx_core.facts import fact_cache_file

    deadlines = []
    for name, (detector, fingerprint) in session.facts.used.items():
        if not detector.ttl_s:
            continue
        try:
            record = json.loads(fact_cache_file(name).read_text())
        except (OSError, ValueError) as exc:
            raise NotReplayable(f"fact {name}: cache file unreadable") from exc
        if not isinstance(record, dict) or record.get("fingerprint") != fingerprint:
            raise NotReplayable(f"fact {name}: cache file changed during the run")
        deadlines.append(float(record.get("created", 0)) + float(detector.ttl_s))
    return deadlines


def _validators(result: RunResult, session: Session) -> list[dict[str, Any]]:
    """Step validators the replay must call again on each entry's outputs."""
    from cmx_core.cache import META, Cache

    cache = Cache()
    found = []
    for node in result.plan.nodes:
        for step in node.steps:
            step_type = session.registry.steps.get(step.uses)
            if step_type is None or step_type.validate is None:
                continue
            ref = reference(step_type.validate)
            if ref is None:
                raise NotReplayable(f"step type {step.uses}: validator cannot be found by name")
            found.append({"step": step.uses, "ref": ref, "meta": str(cache.entry_dir(node.cache_key) / META)})
    return found


def _check_events(session: Session) -> None:
    for name in EVENT_HOOKS:
        for impl in getattr(session.registry.hook, name).get_hookimpls():
            if impl.plugin_name not in OWN_OBSERVERS:
                raise NotReplayable(f"plugin {impl.plugin_name} observes {name}")


def _read(path: Any) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
