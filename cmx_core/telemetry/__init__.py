"""Telemetry every run shares: the run sampler, its series, the application channel, power
and energy sources and soak verdicts (docs/telemetry.md); why a step died is
:mod:`cmx_core.faults.causes`.

* :mod:`.collector`: the run sampler thread (:class:`~.collector.RunTelemetry`) and its
  settings; :mod:`.probes` (psutil: the process tree and the machine), :mod:`.devices` (GPUs
  and RAPL as points), :mod:`.appmetrics` (``ctx.report`` and ``CMX_METRICS_FILE``).
* :mod:`.names`: the metric families, their units and their node_exporter / DCGM names;
  :mod:`.openmetrics`: ``telemetry.om``; :mod:`.summary`: the typed summaries;
  :mod:`.exposition`: live ``/metrics``; :mod:`.monitor`: Prometheus config and Grafana
  dashboard; :mod:`.soak`: a soak's verdict.
* :mod:`.reading`: the :class:`~.reading.PowerSource` protocol and one round's readings;
  :mod:`.nvml`, :mod:`.amd`, :mod:`.rapl`: the three real backends (NVIDIA through
  ``pynvml``, AMD through ``amdsmi`` or the ``amd-smi`` CLI, Linux RAPL through sysfs).
* :mod:`.replay` / :mod:`.record`: a recording of a sampling session's NVML calls and its
  replay (tests drive the NVML backend from a recording; a GPU host records a real one with
  ``python -m cmx_core.telemetry.record``).
* :mod:`.sampler`: the power sampler of a LoadGen test; :mod:`.energy` turns its rounds into
  joules and watts (:class:`~.energy.Meter`, re-exported by :mod:`cmx_core.api`).

A layer just above the provider values: it imports :mod:`cmx_core.providers` (the step's
metrics sink) and :mod:`cmx_core.errors`, nothing else of cmx-core.
"""
