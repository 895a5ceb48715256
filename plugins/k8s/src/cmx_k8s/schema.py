"""Kubernetes objects checked against the strict schemas that ``kubernetes-validate`` bundles
(offline), with one validator per kind built once per process.

``kubernetes_validate.validate`` reads and parses the kind's schema and the 1.4 MB
``_definitions.json`` on every call: about 20 ms an object, so rendering a 200-point sweep
spent most of its time re-reading the same two files. This module reads them once and keeps
the compiled validator; what is checked is the same (the same files, Draft 2020-12, strict)."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from cmx_core.api import CmxError

PACKAGE = "kubernetes_validate"
SCHEMAS = "kubernetes-json-schema"


@cache
def _definitions(version: str) -> Any:
    return _read(f"v{version}-local-strict/_definitions.json", version)


@cache
def object_validator(kind: str, api_version: str, version: str) -> Any:
    """The Draft 2020-12 validator of ``kind`` in ``api_version`` (``apps/v1``, ``v1``) under
    Kubernetes ``version``'s strict schema."""
    import jsonschema  # deferred: jsonschema only when manifests are checked
    from referencing import Registry, Resource  # deferred: with jsonschema, only when manifests are checked

    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # rbac.authorization.k8s.io/v1 -> rbac-v1
    schema = _read(f"v{version}-local-strict/{kind.lower()}-{group}.json", version)
    registry = Resource.from_contents(_definitions(version)) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check(item: dict[str, Any], version: str) -> None:
    """Raise the first ``jsonschema.ValidationError`` of ``item`` (its ``path`` and ``message``
    say where and what)."""
    object_validator(item["kind"], item["apiVersion"], version).validate(item)


def _read(relative: str, version: str) -> Any:
    from importlib.resources import files  # deferred: only when a schema is read, once per kind

    resource = files(PACKAGE).joinpath(SCHEMAS, *relative.split("/"))
    try:
        return json.loads(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CmxError(f"k8s executor: kubernetes-validate has no schema {relative} for Kubernetes {version}; "
                       "install the kubernetes-validate version cmx-k8s pins") from None
