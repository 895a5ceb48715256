"""Bundles: run directories packed for someone else, with proof that no byte changed.

A bundle is a ``.tar.gz`` holding, for each run, its directory under ``runs/<name>/`` (lock,
result, plan, nodes, facts, logs and the raw suite outputs), plus ``environment.json`` (the
environment through an allow-list, secrets redacted), ``ro-crate-metadata.json`` (RO-Crate,
Workflow Run Crate profile) and ``cmx-bundle.json``: the manifest of every other member's
sha256 and size, itself sealed by the digest of its canonical form. ``cmx-bundle.json.sig``
is an optional ssh signature of the manifest. See docs/bundles.md.

Modules: ``manifest`` (the manifest), ``pack`` (create), ``crate`` (RO-Crate), ``members``
(reading a tar without trusting it), ``verify``, ``sign`` (ssh-keygen -Y), ``importer``,
``replay`` and ``verdict`` (the comparison of a replay with the original).
"""

from __future__ import annotations

MANIFEST = "cmx-bundle.json"
SIGNATURE = "cmx-bundle.json.sig"
CRATE = "ro-crate-metadata.json"
ENVIRONMENT = "environment.json"
RUNS = "runs"
RECIPES = "recipes"
FORMAT = "cmx-bundle/1"
SIGNATURE_NAMESPACE = "cmx-bundle"
"""The ``-n`` namespace of ``ssh-keygen -Y sign``: a signature made for anything else does not verify."""
