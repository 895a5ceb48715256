"""The backend contract: what a sandbox is, how a plugin registers one, how one is picked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cmx_core.errors import UsageError
from cmx_core.sandbox.result import SandboxResult
from cmx_core.sandbox.spec import SandboxSpec

DEFAULT_BACKEND = "bubblewrap"


@runtime_checkable
class Sandbox(Protocol):
    """A way to run a :class:`SandboxSpec` confined.

    ``available()`` returns ``None`` when the backend can run here, otherwise one line saying
    why not and how to fix it. ``run(spec)`` raises a UsageError for a spec it cannot run and
    otherwise always returns a :class:`SandboxResult`: what the program did is a verdict,
    never an exception.
    """

    name: str

    def available(self) -> str | None: ...

    def run(self, spec: SandboxSpec) -> SandboxResult: ...


@dataclass(frozen=True)
class SandboxBackend:
    """A registered sandbox backend (``cmx_register_sandboxes``); ``create`` builds the sandbox.

    Example::

        register(SandboxBackend(name="docker", summary="a container per run (GPUs)",
                                create=DockerSandbox))
    """

    name: str
    summary: str
    create: Callable[[], Sandbox]
    version: str = ""
    plugin: str = ""


def pick_backend(backends: Mapping[str, SandboxBackend], name: str = DEFAULT_BACKEND) -> Sandbox:
    """The sandbox of the backend ``name``, or a UsageError listing the registered ones."""
    backend = backends.get(name)
    if backend is None:
        known = ", ".join(sorted(backends)) or "none"
        raise UsageError(f"sandbox backend '{name}' is not registered (registered: {known}); "
                         "install the plugin that provides it or pick one of those")
    return backend.create()
