"""The contract between the LoadGen harness and a system under test (SUT).

The harness runs one LoadGen test in a fresh child process, creates the SUT there from
:data:`SUT_FACTORIES` (``kind -> "module:function"``, the function takes the step's
``sut_params`` mapping and returns a :class:`SUT`) and hands it a :class:`Completer`.

Rules a SUT must follow:

* ``start`` does the heavy loading (model weights) once, before LoadGen starts timing.
* ``issue`` gets parallel lists of LoadGen response ids and QSL sample indices; every id must
  be completed exactly once through the completer, from any thread, possibly later.
* Token SUTs (``uses_tokens = True``) call ``first_token`` for an id before ``complete``;
  the harness then enables LoadGen's token latencies (TTFT/TPOT).
* ``accuracy`` turns the entries of ``mlperf_log_accuracy.json`` (the bytes the SUT passed to
  ``complete``) into metrics, e.g. ``{"top1": 0.93}``.
* Optional (:class:`ReportsErrors`): a SUT whose samples can fail (a server answering HTTP 500,
  a generation that raised) still completes every failed sample, with an error mark, and
  lists the reasons in ``errors()``; ``error_count`` is the number of failed samples. The
  harness calls them after the test (after ``stop``); when ``errors()`` is not empty the
  step's status becomes ``error`` (``invalid`` when LoadGen said INVALID), the reasons go
  to ``invalid_reasons`` and TTFT/TPOT become null, since LoadGen divides by
  ``n_tokens - 1`` and failed samples with 0-1 tokens corrupt them.
* Optional: ``extra_results()`` returns what the SUT measured beyond LoadGen, read after
  ``stop``: ``{"metrics": {name: {"value", "unit", "higher_is_better"}}, "mlperf": {key:
  value}, "warnings": [str], "packages": {name: version}}``. Metrics join the result's
  metrics (never replacing one LoadGen filled), ``mlperf`` keys join the ``mlperf``
  section, warnings join ``mlperf.warnings`` and packages join ``software.packages``.

The harness keeps the bytes given to the completer referenced until LoadGen's
``QuerySamplesComplete`` returns, so a SUT may pass a temporary ``bytes`` object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from cmx_core.api import require_extra
from cmx_core.errors import UsageError


class Completer(Protocol):
    """Given to the SUT by the harness; thread-safe."""

    def complete(self, response_id: int, data: bytes, n_tokens: int | None = None) -> None: ...

    def first_token(self, response_id: int, data: bytes) -> None:
        """Token runs: report the first token (TTFT) before ``complete``."""
        ...


@dataclass(frozen=True)
class AccuracyEntry:
    """One entry of ``mlperf_log_accuracy.json``: the QSL index and the response bytes."""

    qsl_idx: int
    data: bytes


class SUT(Protocol):
    name: str
    total_sample_count: int
    performance_sample_count: int
    uses_tokens: bool  # True: harness enables use_token_latencies and FirstTokenComplete

    def start(self, completer: Completer) -> None:
        """Heavy loading here (model), once."""
        ...

    def load_samples(self, indices: list[int]) -> None: ...

    def unload_samples(self, indices: list[int]) -> None: ...

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        """Must eventually complete every id exactly once (may do it from worker threads)."""
        ...

    def flush(self) -> None: ...

    def stop(self) -> None: ...

    def accuracy(self, entries: list[AccuracyEntry]) -> dict[str, float]:
        """Metrics from the accuracy log entries, e.g. ``{"top1": 0.93}`` or
        ``{"rouge1": .., "rouge2": .., "rougeL": .., "gen_len": .., "tokens_per_sample": ..}``."""
        ...


@runtime_checkable
class ReportsErrors(Protocol):
    """Optional part of the SUT contract: failed samples, reported after the test.

    ``errors()`` returns one line per failure reason, empty when every sample succeeded,
    e.g. ``["6 of 12 samples: HTTP 500"]``. ``error_count`` (optional attribute or
    property) is the number of failed samples; without it the result's
    ``mlperf.failed_samples`` is null.
    """

    def errors(self) -> list[str]: ...


SUT_FACTORIES: dict[str, str] = {
    "noop": "cmx_mlperf.suts.noop:make",
    "classifier": "cmx_mlperf.suts.classifier:make",
    "hf-llm": "cmx_mlperf.llm.hf_sut:make",
    "openai-http": "cmx_mlperf.llm.http_sut:make",
}
"""SUT kind -> ``"module:function"``; ``function(params: Mapping[str, Any]) -> SUT``."""


SUT_EXTRAS: dict[str, tuple[str, ...]] = {
    "classifier": ("torch",),
    "hf-llm": ("llm",),
    "openai-http": ("llm",),  # the tokenizer that counts tokens, and ROUGE for accuracy
}
"""SUT kind -> the cmx-mlperf extras its module imports (checked when the plan is made)."""


def sut_extras(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The extras the ``mlperf.loadgen`` step needs for its literal ``sut:`` (a templated one is
    checked when the SUT is made)."""
    kind = params.get("sut")
    return SUT_EXTRAS.get(kind, ()) if isinstance(kind, str) else ()


def make_sut(kind: str, params: Mapping[str, Any]) -> SUT:
    """Create a SUT of ``kind`` from :data:`SUT_FACTORIES` (imports its module lazily)."""
    target = SUT_FACTORIES.get(kind)
    if target is None:
        known = ", ".join(sorted(SUT_FACTORIES))
        raise UsageError(f"mlperf.loadgen: unknown sut {kind!r}; choose one of: {known}")

    for extra in SUT_EXTRAS.get(kind, ()):
        require_extra("cmx-mlperf", extra, f"mlperf.loadgen sut '{kind}'")
    module_name, _, func_name = target.partition(":")
    factory: Callable[[Mapping[str, Any]], SUT] = getattr(importlib.import_module(module_name), func_name)
    return factory(params)
