"""The engine's internals a plugin's tests drive or patch, re-exported on purpose.

A plugin's tests reach cmx-core through ``cmx_core.api``, ``cmx_core.errors`` and
``cmx_core.testing`` only (tests/test_plugin_tests_imports.py). An executor's tests need a
little more than the api gives a plugin's code: they plan and run through the engine itself
and prepare run directories the way the engine does. These are the very objects, not copies,
so ``monkeypatch.setattr(engine, ...)`` patches the real module. (Not named ``engine.py``:
importing ``cmx_core.testing.engine`` would replace the kit's own ``engine`` global.)

* ``engine``: the run engine module (``plan``, ``plan_view``, ``run_tags``, ``open_session``,
  ``plan_in``, ``executor_settings``, ``write_lock``): tests plan and run in-process with it.
* ``plan_view``: the plan as ``cmx plan --json`` shows it, to assert what an executor adds.
* ``ExecutorChoice``: the executor and its options a plan is made for (``engine.plan_in``).
* ``Recovery``: the retry state an executor's fault handling is handed (with ``api.RetryPolicy``).
* ``new_run_id``, ``Provenance``, ``record_run``: a batch or array test records a run by hand
  exactly as the engine would, to compare it with one the engine recorded.
* ``far_arguments``: the command line the far side of a remote executor runs.
* ``paths``: where cmx keeps its state under ``CMX_HOME`` (``data_dir()``, ``results_db()``).
"""

from __future__ import annotations

from cmx_core import paths
from cmx_core.providers.recovery import Recovery
from cmx_core.run import engine
from cmx_core.run.engine import plan_view
from cmx_core.run.recording import Provenance, record_run
from cmx_core.run.remote import far_arguments
from cmx_core.run.request import ExecutorChoice
from cmx_core.run.runids import new_run_id

__all__ = ["ExecutorChoice", "Provenance", "Recovery", "engine", "far_arguments", "new_run_id", "paths", "plan_view",
           "record_run"]
