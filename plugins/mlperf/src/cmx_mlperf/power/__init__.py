"""The ``cost`` section of a LoadGen test (:mod:`.cost`): energy per query, per token and per
million tokens from what cmx-core's sampler measured (:mod:`cmx_core.telemetry`)."""
