"""Errors of the LLM SUTs; each message is one line naming the thing at fault."""

from __future__ import annotations

from cmx_core.errors import CmxError, UsageError


class ModelDirError(CmxError):
    """A model directory that is missing, unreadable or not a Llama-architecture model."""


class ServerUnreachable(CmxError):
    """An OpenAI-compatible server that cannot be reached or does not answer as expected."""


__all__ = ["ModelDirError", "ServerUnreachable", "UsageError"]
