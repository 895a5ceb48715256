"""``system.container`` carries the image's content digest and the limits the engine applied:
the schema's ``$defs/container`` (tested here, as cmx-docker is what writes it), the read-back
of ``HostConfig``, and a real container run with every limit set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from typing import Any

import jsonschema
import pytest

from cmx_docker.limits import applied_limits
from cmx_docker.runopts import merge
from cmx_docker.templates import RunDefaults

DIGEST = "ab" * 32
LIMITS = {"memory_bytes": 268435456, "cpus": 0.5, "pids": 128, "shm_bytes": 67108864, "gpus": None}


def _container_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("cmx_core").joinpath("schemas/result.schema.json").read_text())
    return jsonschema.Draft202012Validator({"$ref": "#/$defs/container", "$defs": schema["$defs"]})


def _fact(**changes: Any) -> dict[str, Any]:
    return {"image": "cmx-python:0123", "digest": "sha256:" + "0" * 64, "runtime": "docker 28",
            "content_digest": DIGEST, "limits": dict(LIMITS), **changes}


def test_the_schema_takes_the_content_digest_and_the_limits() -> None:
    validator = _container_validator()
    validator.validate(_fact())
    validator.validate(_fact(limits={**LIMITS, "memory_bytes": None, "cpus": None, "pids": None, "gpus": "all"}))
    validator.validate({"image": "x", "digest": None, "runtime": None})  # what cmx-core's own detector writes
    validator.validate(None)


@pytest.mark.parametrize("bad", [
    {"content_digest": "sha256:" + DIGEST},                      # the bare hex, as the label holds it
    {"limits": {k: v for k, v in LIMITS.items() if k != "pids"}},  # every limit is stated, null for none
    {"limits": {**LIMITS, "cpus": 0}},
    {"limits": {**LIMITS, "pids": 0}},
    {"limits": {**LIMITS, "swap": 1}},
    {"limits": {**LIMITS, "memory_bytes": "256m"}},
])
def test_the_schema_refuses_a_malformed_container_record(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        _container_validator().validate(_fact(**bad))


def test_applied_limits_read_the_engine_host_config() -> None:
    """HostConfig as Docker 28 reports it (0 and -1 mean no limit there)."""
    got = applied_limits({"Memory": 268435456, "NanoCpus": 500000000, "PidsLimit": 128, "ShmSize": 67108864,
                          "DeviceRequests": [{"Driver": "", "Count": -1, "DeviceIDs": None,
                                              "Capabilities": [["gpu"]], "Options": {}}]})
    assert got.as_fact() == {**LIMITS, "gpus": "all"}
    none = applied_limits({"Memory": 0, "NanoCpus": 0, "PidsLimit": -1, "ShmSize": 67108864, "DeviceRequests": None})
    assert none.as_fact() == {"memory_bytes": None, "cpus": None, "pids": None, "shm_bytes": 67108864, "gpus": None}
    quota = applied_limits({"CpuQuota": 150000, "CpuPeriod": 100000, "DeviceRequests": [
        {"Count": 0, "DeviceIDs": ["0", "1"], "Capabilities": [["gpu", "utility"]]}]})
    assert quota.cpus == 1.5 and quota.gpus == "0,1"
    assert applied_limits({"Devices": [{"PathOnHost": "nvidia.com/gpu=all"}]}, "all").gpus == "all"  # Podman CDI


def test_a_pids_option_must_be_a_whole_positive_number() -> None:
    from cmx_core.errors import UsageError

    assert merge(RunDefaults(pids=4096), {}, False, False)["pids"] == 4096
    assert merge(RunDefaults(), {"pids": "64"}, False, False)["pids"] == 64
    for bad in ("1.5", "0", "many"):
        with pytest.raises(UsageError, match=rf"pids={bad!r}"):
            merge(RunDefaults(), {"pids": bad}, False, False)


def test_a_container_run_records_the_applied_limits_and_content_digest(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=detect,os",
                           "--container", "--executor-opt", "memory=256m", "--executor-opt", "cpus=0.5",
                           "--executor-opt", "pids=128", "--executor-opt", "shm_size=64m", "--json"],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    container = doc["system"]["container"]
    assert container["limits"] == LIMITS
    from cmx_docker.engine import inspect_image

    label = inspect_image(engine, container["image"])["Config"]["Labels"]["org.cmx.content-digest"]
    assert container["content_digest"] == label and container["image"].endswith(label[:24])
