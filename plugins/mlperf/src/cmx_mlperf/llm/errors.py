"""Errors of the LLM SUTs; each message is one line naming the thing at fault."""

from __future__ import annotations

from cmx_core.errors import CmxError, StepFailed, UsageError


class ModelDirError(CmxError):
    """A model directory that is missing, unreadable or not a Llama-architecture model."""


class ServerUnreachable(CmxError):
    """An OpenAI-compatible server that cannot be reached or does not answer as expected."""


class SampleErrors(StepFailed):
    """Samples that were completed with an error mark during a LoadGen test.

    Raised from a SUT's ``stop()`` when ``fail_on_errors`` is set, so that the step fails
    with a one-line message carrying the counted reasons and returns no result. By default
    the harness reads the SUT's ``errors()`` instead and keeps a result with status ``error``.
    """


def raise_if_errors(sut: str, reasons: list[str]) -> None:
    if reasons:
        raise SampleErrors(f"sut {sut}: samples failed: {'; '.join(reasons)}")


__all__ = ["ModelDirError", "SampleErrors", "ServerUnreachable", "UsageError", "raise_if_errors"]
