"""Typed failure causes (docs/telemetry.md): a step over its memory limit and one the kernel's
OOM killer kills in its own memory cgroup both record ``error.cause: oom`` with the lines that
show it; each other cause is recognised from the log lines real tools print."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.faults.causes import classify, exit_signal
from cmx_core.results.validate import validate_document


def _recipe(recipes: Any, cmd: list[str]) -> None:
    (recipes.dir / "dies.yaml").write_text(
        "name: dies\ntags: [dies]\nsummary: a step that dies\ncache: false\nsteps:\n"
        f"  - uses: shell\n    with: {{cmd: {json.dumps(cmd)}}}\n")


def _failed(cli: Callable[..., Any], recipes: Any) -> dict[str, Any]:
    result = cli("run", "--recipes", recipes.dir, "--tags=dies", "--json", "--no-telemetry")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    written = json.loads(Path(doc["result_path"]).read_text())
    validate_document(written)
    error: dict[str, Any] = written["error"]
    return error


ALLOCATE = "x = bytearray(2 << 30)"


def test_a_step_over_its_memory_limit_records_cause_oom(cli: Callable[..., Any], recipes: Any) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("util-linux prlimit is not installed")
    _recipe(recipes, [prlimit, f"--as={1 << 30}", sys.executable, "-c", ALLOCATE])  # a 1 GiB address-space limit
    error = _failed(cli, recipes)
    assert error["cause"] == "oom", error
    assert any("MemoryError" in line for line in error["evidence"]), error["evidence"]


def _memory_cgroup() -> Path | None:
    """A fresh cgroup-v1 memory group under this process's own (None where not writable)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            group = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / f"cmx-oom-test-{os.getpid()}"
            try:
                group.mkdir()
                (group / "memory.limit_in_bytes").write_text(str(64 << 20))
            except OSError:
                return None
            return group
    return None


def test_a_step_the_oom_killer_kills_records_cause_oom(cli: Callable[..., Any], recipes: Any) -> None:
    group = _memory_cgroup()
    if group is None:
        pytest.skip("no writable cgroup-v1 memory controller (not root, or a cgroup-v2 host)")
    group.rmdir()
    # the step makes a 64 MiB group below its own (docs/faults.md: the step's own evidence) and asks 2 GiB there
    own = 'g=/sys/fs/cgroup/memory$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup)/limited'
    join = f'{own} && mkdir "$g" && echo {64 << 20} > "$g/memory.limit_in_bytes" && echo $$ > "$g/cgroup.procs"'
    _recipe(recipes, ["sh", "-c", f'{join} && exec "$0" -c "{ALLOCATE}"', sys.executable])
    error = _failed(cli, recipes)
    assert error["cause"] == "oom", error
    assert "exited with code -9" in error["message"]
    [line] = error["evidence"]
    assert line.startswith("the kernel OOM-killed 1 process(es) in the step's own memory cgroup ")


def test_a_segfault_is_typed_from_its_signal(cli: Callable[..., Any], recipes: Any) -> None:
    _recipe(recipes, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    error = _failed(cli, recipes)
    assert error["cause"] == "segfault" and "signal 11" in error["evidence"][0]


def test_a_plain_failure_has_no_cause(cli: Callable[..., Any], recipes: Any) -> None:
    _recipe(recipes, ["sh", "-c", "echo nothing useful >&2; exit 3"])
    error = _failed(cli, recipes)
    assert "cause" not in error and "evidence" not in error


@pytest.mark.parametrize(("line", "cause"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", "oom"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
     "nccl"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "xid"),
    ("OSError: [Errno 28] No space left on device: '/scratch/ckpt.pt'", "disk_full"),
    ("Fatal Python error: Segmentation fault", "segfault"),
    ("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***", "time_limit"),
])
def test_log_lines_give_their_cause(tmp_path: Path, line: str, cause: str) -> None:
    log = tmp_path / "stderr.txt"
    log.write_text(f"starting\n{line}\n")
    found = classify("`x` exited with code 1 (log: stderr.txt)", [log])
    assert found is not None and found.cause == cause
    assert found.evidence[-1] == f"stderr.txt: {line}"


def test_a_timeout_and_exit_codes() -> None:
    found = classify("`sleep` timed out after 1 s and was killed (log: x)")
    assert found is not None and found.cause == "time_limit"
    assert exit_signal("`x` exited with code -9: Killed") == 9 and exit_signal("exited with code 139") == 11
    assert exit_signal("exited with code 1") is None
    alone = classify("`x` exited with code -9")  # SIGKILL alone is not OOM
    assert alone is not None and alone.cause == "killed" and alone.signal == "SIGKILL"


def test_results_show_prints_the_cause(cli: Callable[..., Any], recipes: Any) -> None:
    _recipe(recipes, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    result = cli("run", "--recipes", recipes.dir, "--tags=dies", "--json", "--no-telemetry")
    run_id = json.loads(Path(json.loads(result.out)["result_path"]).read_text())["run_id"]
    shown = cli("results", "show", run_id)
    assert "  cause: segfault" in shown.out.splitlines(), shown.out


def test_a_step_past_its_timeout_records_cause_time_limit(cli: Callable[..., Any], recipes: Any) -> None:
    (recipes.dir / "dies.yaml").write_text(
        "name: dies\ntags: [dies]\nsummary: a step that overruns\ncache: false\nsteps:\n"
        "  - uses: shell\n    with: {cmd: ['sleep', '60'], timeout_s: 0.5}\n")
    error = _failed(cli, recipes)
    assert error["cause"] == "time_limit" and "timed out after 0.5 s" in error["evidence"][0], error
