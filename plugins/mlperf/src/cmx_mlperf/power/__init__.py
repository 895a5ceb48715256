"""Energy and cost of a LoadGen test: power sources, a sampler thread, the ``cost`` section.

* :mod:`.reading` — the :class:`~.reading.PowerSource` protocol and one round's readings.
* :mod:`.nvml`, :mod:`.amd`, :mod:`.rapl` — the three real backends (NVIDIA through
  ``pynvml``, AMD through ``amdsmi`` or the ``amd-smi`` CLI, Linux RAPL through sysfs).
* :mod:`.replay` / :mod:`.record` — a recording of a sampling session's NVML calls and its
  replay (tests drive the NVML backend from a recording; a GPU host records a real one).
* :mod:`.sampler` — the thread that samples during the test; :mod:`.energy` turns its rounds
  into joules and watts; :mod:`.cost` builds the result's ``cost`` section and metrics.
"""
