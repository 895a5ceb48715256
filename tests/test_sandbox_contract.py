"""The sandbox contract without running a sandbox: spec checks, verdicts, backend registration."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from cmx_core import api
from cmx_core.api import Limits, SandboxBackend, SandboxResult, SandboxSpec, SandboxUser, UsageError, Verdict, hookimpl
from cmx_core.plugins import loader as plugins
from cmx_core.sandbox import check_spec
from cmx_core.sandbox.bwrap_args import check_program, host_path
from cmx_core.sandbox.verdict import Ending, decide


def _exited(code: int) -> int:
    return code << 8  # a wait status for exit(code)


# -- spec checks: one line, naming the key ------------------------------------------------


@pytest.mark.parametrize(("change", "key"), [
    ({"argv": "python3 -c pass"}, "argv"),
    ({"argv": []}, "argv"),
    ({"argv": ["sh", 3]}, "argv[1]"),
    ({"network": True}, "network"),
    ({"work_path": "relative"}, "work_path"),
    ({"work_path": "/usr/work"}, "work_path"),
    ({"env": {"A=B": "x"}}, "env"),
    ({"user": SandboxUser(uid=0, gid=0)}, "user"),
    ({"limits": Limits(wall_s=0)}, "limits.wall_s"),
    ({"limits": Limits(wall_s=float("inf"))}, "limits.wall_s"),
    ({"limits": Limits(memory_bytes=-1)}, "limits.memory_bytes"),
    ({"limits": Limits(processes=True)}, "limits.processes"),
    ({"limits": Limits(output_bytes=0)}, "limits.output_bytes"),
    ({"limits": Limits(cpus=0)}, "limits.cpus"),
])
def test_a_bad_spec_is_a_one_line_usage_error_naming_the_key(tmp_path: Path, change: dict[str, Any],
                                                             key: str) -> None:
    spec = SandboxSpec(**{"argv": ["true"], "work_dir": tmp_path, **change})
    with pytest.raises(UsageError) as info:
        check_spec(spec)
    message = str(info.value)
    assert "\n" not in message and key in message, message


def test_a_missing_work_dir_and_a_missing_input_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"work_dir .* is not an existing directory"):
        check_spec(SandboxSpec(argv=["true"], work_dir=tmp_path / "absent"))
    with pytest.raises(UsageError, match=r"ro_binds key .* is not an existing"):
        check_spec(SandboxSpec(argv=["true"], work_dir=tmp_path, ro_binds={str(tmp_path / "nope"): "/data"}))
    with pytest.raises(UsageError, match="would hide"):
        check_spec(SandboxSpec(argv=["true"], work_dir=tmp_path, ro_binds={str(tmp_path): "/usr"}))


def test_the_program_is_found_through_the_sandbox_mounts(tmp_path: Path) -> None:
    (tmp_path / "solve.sh").write_text("#!/bin/sh\n")
    spec = SandboxSpec(argv=["sh"], work_dir=tmp_path)
    check_program(spec)  # /usr/bin/sh through the /bin link
    check_program(SandboxSpec(argv=["/work/solve.sh"], work_dir=tmp_path))
    check_program(SandboxSpec(argv=["./solve.sh"], work_dir=tmp_path))
    assert host_path(spec, "/work/solve.sh") == f"{tmp_path}/solve.sh"
    assert host_path(spec, "/root/.bashrc") is None
    for argv0 in ("no-such-program-cmx", "./missing.sh", "/root/x"):
        with pytest.raises(UsageError, match=r"argv\[0\]") as info:
            check_program(SandboxSpec(argv=[argv0], work_dir=tmp_path))
        assert "\n" not in str(info.value)


def test_the_environment_is_only_the_specs_over_minimal_defaults(tmp_path: Path) -> None:
    env = SandboxSpec(argv=["true"], work_dir=tmp_path, env={"COMPETITION_ID": "spaceship"}).full_env()
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                   "COMPETITION_ID": "spaceship"}


# -- verdicts ---------------------------------------------------------------------------------


LIMITS = Limits(wall_s=2, cpu_s=1, memory_bytes=1 << 20, output_bytes=100)


@pytest.mark.parametrize(("ending", "verdict", "code", "sig"), [
    (Ending("exited", _exited(0)), Verdict.OK, 0, None),
    (Ending("exited", _exited(3)), Verdict.ERROR, 3, None),
    (Ending("wall", signal.SIGKILL), Verdict.TIME_LIMIT, None, signal.SIGKILL),
    (Ending("cpu", signal.SIGKILL), Verdict.TIME_LIMIT, None, signal.SIGKILL),
    (Ending("output", signal.SIGKILL), Verdict.OUTPUT_LIMIT, None, signal.SIGKILL),
    (Ending("exited", _exited(137), oom_kills=1), Verdict.MEMORY_LIMIT, None, signal.SIGKILL),
    (Ending("exited", _exited(1), oom_kills=2), Verdict.MEMORY_LIMIT, None, signal.SIGKILL),
    (Ending("exited", _exited(128 + signal.SIGXCPU)), Verdict.TIME_LIMIT, None, signal.SIGXCPU),
    (Ending("exited", _exited(137), cpu_s=1.2), Verdict.TIME_LIMIT, None, signal.SIGKILL),
    (Ending("exited", _exited(137), cpu_s=0.1), Verdict.KILLED, None, signal.SIGKILL),
    (Ending("exited", _exited(128 + signal.SIGXFSZ)), Verdict.OUTPUT_LIMIT, None, signal.SIGXFSZ),
    (Ending("exited", _exited(1), big_file=True), Verdict.OUTPUT_LIMIT, 1, None),
    (Ending("exited", _exited(128 + signal.SIGSEGV)), Verdict.KILLED, None, signal.SIGSEGV),
    (Ending("exited", signal.SIGTERM), Verdict.KILLED, None, signal.SIGTERM),
    (Ending("exited", _exited(1), setup_error="bwrap: Can't mount proc"), Verdict.ERROR, 1, None),
])
def test_each_ending_gets_its_verdict(ending: Ending, verdict: Verdict, code: int | None, sig: int | None) -> None:
    got, exit_code, got_sig, reason = decide(ending, LIMITS)
    assert (got, exit_code, got_sig) == (verdict, code, sig), reason
    assert reason and "\n" not in reason
    assert os.WIFSIGNALED(signal.SIGTERM)  # the raw status of a process killed by SIGTERM


def test_the_setup_error_is_the_reason(tmp_path: Path) -> None:
    _, _, _, reason = decide(Ending("exited", _exited(1), setup_error="bwrap: Can't mount proc"), LIMITS)
    assert reason.endswith("bwrap: Can't mount proc")


# -- backends: built-in, registered by a plugin, picked by name -----------------------------


class EchoSandbox:
    """A backend that runs nothing: enough to see the registration and the lookup."""

    name = "echo"

    def available(self) -> str | None:
        return None

    def run(self, spec: SandboxSpec) -> SandboxResult:
        return SandboxResult(verdict=Verdict.OK, exit_code=0, signal=None, wall_s=0.0, cpu_s=0.0,
                             peak_memory_bytes=None, stdout=" ".join(spec.argv).encode(), stderr=b"",
                             truncated=False, reason="not run", backend=self.name)


class EchoPlugin:
    @hookimpl
    def cmx_register_sandboxes(self, register: Any) -> None:
        register(SandboxBackend(name="echo", summary="Pretend to run", create=EchoSandbox))


class ClashPlugin:
    @hookimpl
    def cmx_register_sandboxes(self, register: Any) -> None:
        register(SandboxBackend(name="echo", summary="Another echo", create=EchoSandbox))


def test_the_builtin_bubblewrap_backend_is_the_default() -> None:
    registry = plugins.load_registry(extra=[])
    assert registry.sandboxes["bubblewrap"].plugin == "cmx-core"
    box = registry.sandbox()
    assert box.name == "bubblewrap" and isinstance(box, api.Sandbox)


def test_a_plugin_registers_a_sandbox_backend_through_the_hook(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")  # only the core and this test's plugin
    registry = plugins.load_registry(extra=[("echoplug", EchoPlugin())])
    backend = registry.sandboxes["echo"]
    assert (backend.plugin, backend.summary) == ("echoplug", "Pretend to run")
    assert registry.plugins["echoplug"].provides["sandboxes"] == ["echo"]
    result = registry.sandbox("echo").run(SandboxSpec(argv=["a", "b"], work_dir=tmp_path))
    assert (result.verdict, result.stdout, result.ok) == (Verdict.OK, b"a b", True)
    assert set(registry.sandboxes) == {"bubblewrap", "echo"}


def test_an_unknown_backend_is_a_usage_error_listing_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")  # only the core and this test's plugin
    registry = plugins.load_registry(extra=[("echoplug", EchoPlugin())])
    with pytest.raises(UsageError, match=r"'nosuch' is not registered \(registered: bubblewrap, echo\)"):
        registry.sandbox("nosuch")


def test_two_plugins_registering_one_backend_name_is_a_load_error() -> None:
    registry = plugins.load_registry(extra=[("one", EchoPlugin()), ("two", ClashPlugin())])
    assert "echo" not in registry.sandboxes
    assert "also registered by" in (registry.plugins["one"].error or "")
    assert registry.conflicts["echo"] == ("one", "two")


def test_the_api_exports_the_sandbox_names_lazily() -> None:
    for name in ("get_sandbox", "Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser",
                 "SandboxResult", "Verdict"):
        assert name in api.__all__ and getattr(api, name) is not None
    assert api.get_sandbox().name == "bubblewrap"
