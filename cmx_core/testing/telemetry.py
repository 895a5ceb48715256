"""The telemetry readers, for a plugin's tests of what its steps report (re-exported on purpose).

* ``AppSeries``, ``StepMetrics``: the application metrics a step reports, as the engine reads them.
* ``read_series``: an OpenMetrics series file, e.g. the peak a run sampled.
* ``open_source``, ``SERIES_FILE``: the first power source that opens on this machine, and the
  file the power sampler writes a run's samples to.
"""

from __future__ import annotations

from cmx_core.telemetry.appmetrics import AppSeries, StepMetrics
from cmx_core.telemetry.energy import open_source
from cmx_core.telemetry.openmetrics import read_series
from cmx_core.telemetry.sampler import SERIES_FILE

__all__ = ["SERIES_FILE", "AppSeries", "StepMetrics", "open_source", "read_series"]
