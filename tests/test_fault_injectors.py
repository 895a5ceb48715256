"""A new fault is one new file plus its registration (docs/faults.md, :mod:`cmx_core.faults`):
a scratch injector, written to a file of its own and registered by one call, is parsed by
``--inject``, listed in its help, checked against the executor before anything runs, and
armed on the step's process, with nothing else changed. Also: every built-in kind has one
injector, and the executor's own kinds are not armed by the steps' engine."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cmx_core.cli.recovery_opts import add_recovery_options, recovery
from cmx_core.errors import UsageError
from cmx_core.faults.armed import Armed, armed
from cmx_core.faults.kinds import BUILTIN
from cmx_core.faults.registry import INJECTORS, check_injections, parse_injection
from cmx_core.providers.recovery import FaultClass, FaultKind
from cmx_core.run.processes import run_process

SCHEMA = Path(__file__).resolve().parent.parent / "cmx_core" / "schemas" / "result.schema.json"

SCRATCH = '''
"""``env-mark@WORD``: the step's process sees CMX_SCRATCH_MARK=WORD (a test's scratch fault)."""

from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.faults.injector import StepInjector, Strike
from cmx_core.providers.recovery import FaultKind, Injection

KIND = FaultKind("env-mark")


class EnvMark(StepInjector):
    kind = KIND

    def parse(self, text: str, when: str) -> Injection:
        if not when.isalpha():
            raise UsageError(f"--inject {text!r}: use env-mark@WORD")
        return Injection(KIND, text=text)

    def check(self, injection: Injection, executor: str) -> None:
        if executor != "local":
            raise UsageError(f"--inject {injection.text}: only the local executor marks its steps")

    def prefix(self, injection: Injection, cwd: Path, strike: Strike) -> list[str]:
        strike.fire()
        return ["env", "CMX_SCRATCH_MARK=" + injection.text.partition("@")[2]]


INJECTOR = EnvMark()
'''

@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[ModuleType]:
    """The scratch fault's one file, imported, and its one registration line."""
    path = tmp_path / "env_mark.py"
    path.write_text(textwrap.dedent(SCRATCH))
    spec = importlib.util.spec_from_file_location("cmx_scratch_env_mark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    INJECTORS.register(module.INJECTOR)  # the registration line
    try:
        yield module
    finally:
        INJECTORS.unregister(module.KIND)


def test_a_scratch_fault_parses_checks_and_arms(scratch: ModuleType, cli: Callable[..., Any], tmp_path: Path) -> None:
    injection = parse_injection("env-mark@hello")
    assert injection.fault == scratch.KIND and isinstance(injection.fault, FaultKind)
    with pytest.raises(UsageError, match="use env-mark@WORD"):
        parse_injection("env-mark@42")
    check_injections([injection], "local")
    with pytest.raises(UsageError, match="only the local executor"):
        check_injections([injection], "slurm")
    assert "env-mark" in cli("run", "--help").out
    options = argparse.ArgumentParser()
    add_recovery_options(options)
    assert recovery(options.parse_args(["--inject", "env-mark@hello"])).injections == (injection,)

    with armed([injection], None) as state:  # as the engine arms a step's first attempt
        code = run_process([sys.executable, "-c", "import os; print(os.environ.get('CMX_SCRATCH_MARK'))"],
                           tmp_path, dict(os.environ), 30, tmp_path / "out.txt", tmp_path / "err.txt")
    assert code == 0 and (tmp_path / "out.txt").read_text() == "hello\n"
    assert state is not None and state.fired_at is not None


def test_an_unregistered_fault_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown fault 'env-mark'"):
        parse_injection("env-mark@hello")


def test_every_builtin_kind_has_one_injector_and_the_executors_own_are_not_armed(tmp_path: Path) -> None:
    assert [i.kind for i in BUILTIN] == ["kill-step", "oom", "disk-full", "partition", "kill-worker"]
    assert [k for k in INJECTORS.kinds if INJECTORS.get(k).by_executor] == ["kill-worker"]
    armed = Armed((parse_injection("kill-worker"), parse_injection("partition")))
    assert armed.prefix(tmp_path) == ["unshare", "--net", "--"]


def test_fault_classes_keep_their_spellings() -> None:
    assert [c.value for c in FaultClass] == ["node_lost", "preempted", "timeout", "oom", "disk_full", "killed",
                                             "network", "exit_code", "bad_input"]
    assert f"{FaultClass.DISK_FULL}" == "disk_full" and json.dumps([FaultClass.OOM]) == '["oom"]'


def test_the_result_schema_lists_every_kind_and_class() -> None:
    """A new kind is also a value results may carry: the schema names it (and the docs' table)."""
    schema = json.loads(SCHEMA.read_text())
    assert schema["$defs"]["fault_class"]["enum"] == [c.value for c in FaultClass]
    injection = schema["$defs"]["provenance"]["properties"]["injections"]["items"]
    assert injection["properties"]["fault"]["enum"] == list(INJECTORS.kinds)
