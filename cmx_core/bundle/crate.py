"""RO-Crate metadata of a bundle (``ro-crate-metadata.json``), written with the ``rocrate``
library and following the Workflow Run Crate profile (RO-Crate 1.1): each run's ``plan.json``
is a ``ComputationalWorkflow`` (the resolved recipe graph), the first one the crate's
``mainEntity``; each run is a ``CreateAction`` whose ``instrument`` is its plan, whose
``object`` is its lock and inputs and whose ``result`` is its result and other files."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cmx_core.bundle import RUNS
from cmx_core.bundle.manifest import BundledRun
from cmx_core.errors import UsageError

PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": ("Process Run Crate", "0.5"),
    "https://w3id.org/ro/wfrun/workflow/0.5": ("Workflow Run Crate", "0.5"),
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": ("Workflow RO-Crate", "1.0"),
}
_STATUS = {"error": "FailedActionStatus"}


def crate_metadata(members: Mapping[str, bytes], runs: Sequence[BundledRun]) -> bytes:
    try:
        # deferred: optional rocrate, only when this runs
        from rocrate.model.contextentity import ContextEntity  # type: ignore[import-untyped]

        # deferred: optional rocrate, only when this runs
        from rocrate.rocrate import ROCrate  # type: ignore[import-untyped]
    except ImportError:

        raise UsageError("cmx bundle create needs the rocrate library: pip install 'rocrate==0.16.0'") from None

    crate = ROCrate(version="1.1")
    crate.name = f"cmx bundle of {len(runs)} run(s)"
    crate.description = "Run directories packed by cmx bundle create (lock, result, plan, logs, raw outputs)"
    crate.root_dataset["conformsTo"] = [{"@id": uri} for uri in PROFILES]
    for uri, (name, version) in PROFILES.items():
        crate.add(ContextEntity(crate, uri, properties={"@type": "CreativeWork", "name": name, "version": version}))
    language = crate.add(ContextEntity(crate, "#cmx-plan", properties={
        "@type": "ComputerLanguage", "name": "cmx plan", "alternateName": "cmx"}))
    entities = {name: crate.add_file(dest_path=name, properties=_file_properties(name, len(data)))
                for name, data in sorted(members.items())}
    for index, run in enumerate(runs):
        _add_run(crate, run, members, entities, language, main=index == 0)
    return (json.dumps(crate.metadata.generate(), indent=1, sort_keys=True) + "\n").encode("utf-8")


def _file_properties(name: str, size: int) -> dict[str, Any]:
    properties: dict[str, Any] = {"contentSize": str(size)}
    if name.startswith(f"{RUNS}/") and name.count("/") == 2 and name.endswith("/plan.json"):
        properties["@type"] = ["File", "SoftwareSourceCode", "ComputationalWorkflow"]
    if name.endswith(".json"):
        properties["encodingFormat"] = "application/json"
    elif name.endswith((".txt", ".log")):
        properties["encodingFormat"] = "text/plain"
    return properties


def _add_run(crate: Any, run: BundledRun, members: Mapping[str, bytes], entities: Mapping[str, Any],
             language: Any, *, main: bool) -> None:
    from rocrate.model.contextentity import ContextEntity  # deferred: rocrate only when this runs (290 modules)

    prefix = f"{RUNS}/{run.dir}/"
    plan = entities.get(prefix + "plan.json")
    if plan is not None:
        plan["name"] = f"{run.recipe} (resolved plan)"
        plan["programmingLanguage"] = language
        if main:
            crate.mainEntity = plan
    document = json.loads(members[prefix + "result.json"])
    inputs = [crate.add(ContextEntity(crate, f"#{run.run_id}-input-{key}", properties={
        "@type": "PropertyValue", "name": key, "value": json.dumps(value)}))
        for key, value in sorted(document["provenance"]["query"]["inputs"].items())]
    objects = [entities[prefix + "lock.json"], *inputs]
    results = [e for name, e in entities.items() if name.startswith(prefix) and name not in (
        prefix + "lock.json", prefix + "plan.json")]
    crate.add_action(plan, identifier=f"#run-{run.run_id}", object=objects, result=results, properties={
        "name": f"cmx run of {run.recipe} ({run.run_id})",
        "startTime": document["timing"]["started_at"], "endTime": document["timing"]["finished_at"],
        "actionStatus": {"@id": f"http://schema.org/{_STATUS.get(document['status'], 'CompletedActionStatus')}"},
    })
