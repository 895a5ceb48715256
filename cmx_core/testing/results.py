"""Result documents and the results database, for a plugin's tests (re-exported on purpose).

* ``example_document``, ``mlperf_part``, ``H100_FACTS``: a valid result document (and an MLPerf
  part, and the facts of an H100 machine) to build a suite's result on and validate it.
* ``SCHEMA_PATH``: the result schema's file, for a suite that checks its part against it.
* ``compare_documents``: what ``cmx compare`` says of two results, e.g. across executors.
* ``ResultStore``: the results database (``paths.results_db()``), to read what a run stored.
* ``engine_git_commit``: the engine's commit as a result records it.
"""

from __future__ import annotations

from cmx_core.results import SCHEMA_PATH, compare_documents
from cmx_core.results.examples import H100_FACTS, example_document, mlperf_part
from cmx_core.results.gitinfo import engine_git_commit
from cmx_core.results.store import ResultStore

__all__ = ["H100_FACTS", "SCHEMA_PATH", "ResultStore", "compare_documents", "engine_git_commit", "example_document",
           "mlperf_part"]
