"""The user-facing errors of cmx-docker (each message is one line: what, where, what to do)."""

from __future__ import annotations

from cmx_core.errors import CmxError, StepFailed


class EngineUnavailable(CmxError):
    """No Docker or Podman API answers on any known socket."""


class TemplateError(CmxError):
    """A container template that is missing, malformed, or fails to render."""


class ContextError(CmxError):
    """A build context that lacks a file the template or its Dockerfile needs."""


class ImageUnavailable(CmxError):
    """A base image that is neither present locally nor pullable."""


class BuildFailed(StepFailed):
    """The engine's build failed (a RUN step, a bad instruction...)."""


class ContainerFailed(StepFailed):
    """The container exited non-zero, was OOM-killed, or ran past its time limit."""
