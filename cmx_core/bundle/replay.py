"""``cmx bundle replay``: re-run each run of a verified bundle from its lock, here, refusing
drift as ``cmx run --lock`` does (``allow_drift`` names the classes let through; ``hardware``
also lets the replay run on another ``hardware_class``), then judge each lock's replays
against its original repeats (:mod:`cmx_core.bundle.verdict`).

The locks are copied into a private staging directory under the cache: the copy points the
query at recipes that exist here (``--recipes``, the lock's own directories when they exist,
else the recipe files the bundle carries) and drops a facts file that does not exist here
(the replay then detects this machine's facts). Nothing else of the lock changes.

The bundle's runs of one lock (digest) are the original's repeats. Each lock is replayed
``repeats`` times (default: as many times as the original was measured, and at least
:data:`MIN_REPEATS`), so both sides are distributions. Each replay's result records
``provenance.replay_of`` (the original run and its lock digest): a replay's own lock names
other recipe paths, so without it ``cmx results compare --repeats`` could not find its
original.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_core import paths
from cmx_core.bundle import RECIPES, RUNS
from cmx_core.bundle.verdict import DEFAULT_TOLERANCE, Judgement, judge, worst
from cmx_core.bundle.verify import VerifiedBundle
from cmx_core.errors import ResolveError, UsageError
from cmx_core.results.facts_map import system_section
from cmx_core.results.hardware import from_system, of_document
from cmx_core.results.store import ResultStore
from cmx_core.results.writer import write_result
from cmx_core.run import engine
from cmx_core.run.engine import detect_facts
from cmx_core.run.lock import check_drift_classes
from cmx_core.run.request import RunRequest


@dataclass(frozen=True)
class ReplayOptions:
    executor: str | None = None
    allow_drift: Sequence[str] = ()
    recipes: Sequence[str] = ()
    facts_file: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    options: Mapping[str, Any] = field(default_factory=dict)
    repeats: int | None = None
    """Replays of each lock; None: as many as the original's repeats, at least MIN_REPEATS."""


MIN_REPEATS = 3
"""The default number of replays of a lock is at least this (the noise rule needs 3 a side)."""


@dataclass(frozen=True)
class ReplayReport:
    bundle: str
    replays: tuple[tuple[str, str], ...]  # (original run id, replay run id)
    judgements: tuple[Judgement, ...]

    def to_json(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "verdict": self.verdict,
                "replays": [{"original": o, "replay": r} for o, r in self.replays],
                "comparisons": [j.to_json() for j in self.judgements]}

    @property
    def verdict(self) -> str:
        """The worst lock's verdict (``differs`` worst of all); ``not comparable`` for none."""
        return worst([j.verdict for j in self.judgements])


def replay_bundle(bundle: VerifiedBundle, options: ReplayOptions) -> ReplayReport:
    check_drift_classes(options.allow_drift)
    if options.repeats is not None and options.repeats < 1:
        raise UsageError(f"--repeats {options.repeats}: give 1 or more replays of each lock")
    originals = {r.run_id: json.loads(bundle.members[f"{RUNS}/{r.dir}/result.json"]) for r in bundle.manifest.runs}
    groups = _groups(bundle)
    staging_root = paths.cache_dir() / "bundle-replay"
    staging_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="replay-", dir=staging_root))
    try:
        recipes_dir = _bundled_recipes(bundle, staging)
        _check_hardware(originals, options, _facts_file(bundle, options))
        replayed = []
        for group in groups:
            count = options.repeats or max(MIN_REPEATS, len(group))
            first = group[0]
            for index in range(count):
                document = _replay_one(bundle, first.dir, staging / str(index), recipes_dir, options)
                replayed.append((first.run_id, _mark_replay(document, originals[first.run_id], bundle)))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    judgements = [judge([originals[r.run_id] for r in group], [d for o, d in replayed if o == group[0].run_id],
                        options.tolerance) for group in groups]
    return ReplayReport(str(bundle.path), tuple((o, d["run_id"]) for o, d in replayed), tuple(judgements))


def _groups(bundle: VerifiedBundle) -> list[list[Any]]:
    """The bundle's runs by lock digest (the repeats of one lock), in bundle order."""
    groups: dict[str, list[Any]] = {}
    for run in bundle.manifest.runs:
        groups.setdefault(run.lock_digest or f"run:{run.run_id}", []).append(run)
    return list(groups.values())


def _mark_replay(document: Mapping[str, Any], original: Mapping[str, Any], bundle: VerifiedBundle) -> dict[str, Any]:
    """The replay's result with ``provenance.replay_of``, rewritten in place and re-indexed."""
    replay_of = {"run_id": original["run_id"], "lock_digest": original["provenance"].get("lock_digest"),
                 "bundle_sha256": bundle.sha256}
    marked = {**document, "provenance": {**document["provenance"], "replay_of": replay_of}}
    store = ResultStore(paths.results_db())
    _, path = store.resolve(str(document["run_id"]))
    store.index(marked, write_result(path.parent, marked, suites=None), validated=True)
    return marked


def _bundled_recipes(bundle: VerifiedBundle, staging: Path) -> Path | None:
    files = {n: d for n, d in bundle.members.items() if n.startswith(f"{RECIPES}/")}
    if not files:
        return None
    target = staging / "recipes"
    for name, data in files.items():
        digest_dir, filename = name.split("/")[1], name.split("/")[-1]
        path = target / f"{digest_dir}-{filename}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return target


def _facts_file(bundle: VerifiedBundle, options: ReplayOptions) -> str | None:
    """The facts file the replay will use: ``--facts``, else a lock's own when it exists here."""
    if options.facts_file:
        return options.facts_file
    for run in bundle.manifest.runs:
        locked = json.loads(bundle.members[f"{RUNS}/{run.dir}/lock.json"])["query"].get("facts_file")
        if locked and Path(locked).is_file():
            return str(locked)
    return None


def _check_hardware(originals: Mapping[str, Mapping[str, Any]], options: ReplayOptions,
                    facts_file: str | None) -> None:
    """Refuse to run on another hardware class unless ``hardware`` drift is allowed."""
    if "hardware" in options.allow_drift:
        return

    here = from_system(system_section(detect_facts(facts_file=facts_file)))
    for run_id, document in originals.items():
        there = of_document(document)
        if there.id != here.id:
            raise ResolveError(f"bundle run {run_id} was measured on hardware class {there.id} ({there.label}), "
                               f"this machine is {here.id} ({here.label}): {'; '.join(there.differences(here))}; "
                               "replay with --allow-drift=hardware for an A/B across hardware")


def _replay_one(bundle: VerifiedBundle, directory: str, staging: Path, recipes_dir: Path | None,
                options: ReplayOptions) -> dict[str, Any]:
    lock = json.loads(bundle.members[f"{RUNS}/{directory}/lock.json"])
    query = lock["query"]
    locked_dirs = [d for d in query.get("recipes_dirs") or () if Path(d).is_dir()]
    if options.recipes:
        query["recipes_dirs"] = list(options.recipes)
    elif len(locked_dirs) != len(query.get("recipes_dirs") or ()):
        query["recipes_dirs"] = [str(recipes_dir)] if recipes_dir else []
    if query.get("facts_file") and not Path(query["facts_file"]).is_file():
        query["facts_file"] = None
    path = staging / directory / "lock.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock, indent=2, sort_keys=True))
    result = engine.run(RunRequest(lock=path, allow_drift=list(options.allow_drift), executor=options.executor,
                                   facts_file=options.facts_file, options=dict(options.options)))
    return result.document
