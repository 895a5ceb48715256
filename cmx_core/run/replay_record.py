"""Write the warm-run memo after a ``cmx run`` whose every node was a valid cache hit.

The memo is the run's read log (:mod:`cmx_core.reads`): every recipe directory and file,
every cache entry's metadata and recorded paths, every ``path`` input, every fact (its
fingerprint function or its detect function and value, its cache file and expiry), every
variable steps let through and every step validator consulted were reported by the code
that read them while the run went on. Added here are only what belongs to the invocation
itself: the ``--recipes`` arguments as given, the plugin set (the discovery fingerprint
and the source of the cmx and plugin modules loaded) and the documents the run wrote.
:mod:`cmx_core.run.replay` checks all of it again in a fresh process and, when nothing
changed, writes the same run again (new run id and times) without loading the plugin
system. Anything a stage could not record in a checkable form (a fact from a detector
whose functions cannot be found by name, a facts file, a step validator defined in a
closure), a third-party event hook, or a read whose state changed while the run went on
means no memo, never a wrong replay. The memo is signed (see
:func:`cmx_core.run.replay.signing_key`), so a file planted in a shared cache is ignored.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from cmx_core import reads
from cmx_core.datautil import digest, thaw
from cmx_core.plugins.command_index import discovery_fingerprint
from cmx_core.plugins.hookspecs import hookimpl
from cmx_core.reads import file_state
from cmx_core.run.replay import MEMO_FORMAT, memo_path, write_signed

if TYPE_CHECKING:
    from cmx_core.plugins.registry import Registry
    from cmx_core.run.engine import RunResult, Session

RUN_FILES = ("nodes.json", "facts.json")
"""What the engine writes beside plan, lock and result (see :mod:`cmx_core.run.recording`)."""

EVENT_HOOKS = ("cmx_node_started", "cmx_node_finished", "cmx_node_failed", "cmx_result_written")
OWN_OBSERVERS = {"cmx-progress", "cmx-replay-observer"}
"""Event-hook implementers whose effect the replay reproduces itself."""


class NotReplayable(Exception):
    """Why a run gets no memo (only reported with ``-v``)."""


class Recorder:
    """Records one ``cmx run`` (its read log; which nodes came from the cache, with which
    outputs) and then writes its memo.

    Registered as a plugin named ``cmx-replay-observer`` on ``registry`` (the one the run
    uses, handed over by the command line) for the duration of the run."""

    def __init__(self, argv: list[str], key: str, recipes_args: list[str], registry: Registry, *,
                 json_output: bool, verbose: bool) -> None:
        self.argv = list(argv)
        self.registry = registry
        self.key = key
        self.recipes_args = list(recipes_args)
        self.json_output = json_output
        self.verbose = verbose
        self.finished: dict[str, str | None] = {}
        self.log = reads.ReadLog()
        self._recording = reads.recording()

    def __enter__(self) -> Recorder:
        self.log = self._recording.__enter__()
        for argument in self.recipes_args:  # the directories as given, before resolution
            reads.link(argument)
        self.registry.manager.register(self, name="cmx-replay-observer")
        return self

    def __exit__(self, *exc: object) -> None:
        self._recording.__exit__(*exc)
        manager = self.registry.manager
        if manager.is_registered(self):
            manager.unregister(self)

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Any, wall_s: float, cached: bool) -> None:
        self.finished[node_id] = digest(thaw(outputs)) if cached else None

    def remember(self, result: RunResult) -> None:
        """Write the memo, or (with ``-v``) say why this run cannot be replayed."""
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
        log = self.log
        if log.refused:
            raise NotReplayable(log.refused[0])
        changed = log.changed_since()
        if changed:
            raise NotReplayable(changed)
        memo = {
            "format": MEMO_FORMAT,
            "key": self.key,
            "argv": self.argv,
            "json": self.json_output,
            "verbose": self.verbose,
            "discovery": _discovery(),
            "nodes": [n.id for n in nodes],
            "recipe": result.plan.root.recipe.name,
            "links": [[path, real] for path, real in log.links.items()],
            "files": list(log.files.values()) + _code_files(session),
            "env": dict(log.env),
            "deadline": min(log.deadlines, default=None),
            "facts": list(log.facts.values()),
            "validators": list(log.validators.values()),
            "plan_json": (result.run_dir / "plan.json").read_text(encoding="utf-8"),
            "lock_json": (result.run_dir / "lock.json").read_text(encoding="utf-8"),
            "run_files": {name: (result.run_dir / name).read_text(encoding="utf-8") for name in RUN_FILES},
            "document": result.document,
        }
        written = json.dumps([memo["plan_json"], memo["lock_json"],
                              {k: v for k, v in result.document.items() if k != "run_id"}])
        if result.run_id in written or str(result.run_dir) in written:
            raise NotReplayable("the run's own id or directory appears in what it wrote")
        body = json.dumps(memo)  # key order kept: the replayed result.json is the same text


        write_signed(memo_path(self.key), body)


def _discovery() -> list[str]:
    return discovery_fingerprint()


def _code_files(session: Session) -> list[list[Any]]:
    """The source of every module of cmx-core and of the plugins that this run loaded: an
    edited checkout (an editable install keeps its version) must not replay old code."""
    packages = {"cmx_core"} | {info.module.partition(".")[0] for info in session.registry.plugins.values()}
    files = {getattr(module, "__file__", None) for name, module in list(sys.modules.items())
             if name.partition(".")[0] in packages}
    return [file_state(path) for path in sorted(f for f in files if isinstance(f, str))]


def _check_events(session: Session) -> None:
    for name in EVENT_HOOKS:
        for impl in getattr(session.registry.hook, name).get_hookimpls():
            if impl.plugin_name not in OWN_OBSERVERS:
                raise NotReplayable(f"plugin {impl.plugin_name} observes {name}")
