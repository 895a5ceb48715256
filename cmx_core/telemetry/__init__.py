"""Telemetry every suite shares: power and energy sources and the sampler thread.

* :mod:`.reading`: the :class:`~.reading.PowerSource` protocol and one round's readings.
* :mod:`.nvml`, :mod:`.amd`, :mod:`.rapl`: the three real backends (NVIDIA through
  ``pynvml``, AMD through ``amdsmi`` or the ``amd-smi`` CLI, Linux RAPL through sysfs).
* :mod:`.replay` / :mod:`.record`: a recording of a sampling session's NVML calls and its
  replay (tests drive the NVML backend from a recording; a GPU host records a real one with
  ``python -m cmx_core.telemetry.record``).
* :mod:`.sampler`: the thread that samples during a measurement; :mod:`.energy` turns its
  rounds into joules and watts (:class:`~.energy.Meter`, re-exported by :mod:`cmx_core.api`).

Moved here from cmx-mlperf so that every suite measures the machine the same way. A layer at
the bottom: it imports nothing of cmx-core.
"""
