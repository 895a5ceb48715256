"""The chaos matrix every executor's tests run (docs/faults.md): one sweep whose points each
get one injected fault, retried once, on the executor under test, and one run whose step
refuses its input (exit code 2) under ``--retries 2``. :func:`chaos_problems` says what
went wrong, empty when each point was recorded exactly once with the right attempts and
faults and the refused input was not retried.

Everything runs as real ``cmx`` processes (``python -m cmx_core``) against real mechanisms
(SIGKILL, a memory cgroup, a size-limited tmpfs, a network namespace without a route, the
cluster executor's own kill of its worker); only the first attempt of ``sleep`` waits (30 s
at most, until its kill), ``work`` takes 3 s (long enough for its worker to be killed), and
every command is bounded by ``timeout_s``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.faults.kinds import disk_full, kill_step, oom, partition
from cmx_core.faults.kinds.kill_worker import KILL_WORKER
from cmx_core.providers.recovery import FaultClass, FaultKind
from cmx_core.sandbox.bubblewrap import make_groups

CHAOS_TAG = "chaos-matrix"
_SCRIPT = ("import os, sys, time\\nwhat = sys.argv[1]\\nif what == 'oom':\\n  b = bytearray(300 << 20)\\n"
           "elif what == 'bad':\\n  sys.exit(2)\\nelif what == 'disk':\\n"
           "  open('out.bin', 'wb').write(os.urandom(1 << 20))\\n"
           "elif what == 'sleep' and os.environ['CMX_ATTEMPT'] == '1':\\n  time.sleep(30)\\n"
           "elif what == 'net':\\n  import socket\\n"
           "  socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(('127.0.0.1', 9))\\n"
           "elif what == 'work':\\n  time.sleep(3)\\nprint('ok')")

FAULTS: Mapping[FaultKind, tuple[str, FaultClass]] = {
    kill_step.KIND: ("kill-step@0s", FaultClass.KILLED),
    oom.KIND: ("oom@64M", FaultClass.OOM),
    disk_full.KIND: ("disk-full@64K", FaultClass.DISK_FULL),
    partition.KIND: ("partition", FaultClass.NETWORK),
    KILL_WORKER: ("kill-worker", FaultClass.NODE_LOST),
}
"""Each fault the matrix injects: its ``--inject`` text and the fault class it must show."""
INPUTS = {kill_step.KIND: "sleep", oom.KIND: "oom", disk_full.KIND: "disk", partition.KIND: "net",
          KILL_WORKER: "work"}
"""The recipe's ``what`` input each fault is injected into."""


def chaos_recipe() -> str:
    """The recipe (YAML text) of the matrix: one shell step whose input says what it needs."""
    return textwrap.dedent(f"""\
        name: chaos-matrix
        tags: [test, {CHAOS_TAG}]
        summary: needs memory or disk, sleeps, or refuses its input
        cache: false
        inputs:
          what: {{type: string, default: sleep}}
        steps:
          - uses: shell
            with:
              cmd: [{sys.executable}, -c, "{_SCRIPT}", "{{{{ inputs.what }}}}"]
        """)


def wait_until(predicate: Callable[[], Any], what: str, proc: subprocess.Popen[str], bound_s: float,
               tick_s: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something true, and return that; an AssertionError
    when ``proc`` (the cmx process under test) ends first, with its stderr's tail, or when
    ``bound_s`` pass (the fault tests' one bounded wait)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"cmx ended (exit {proc.returncode}) before {what}: {proc.communicate()[1][-3000:]}")
        time.sleep(tick_s)
    raise AssertionError(f"{what} did not happen within {bound_s:g} s")


def counter_recipe(name: str, tag: str, to: int = 12) -> str:
    """The recipe (YAML text) of a checkpointing step for the job-level retry tests: it counts
    to its input ``to`` (default ``to``), 0.5 s a count, keeping its count in its checkpoint,
    and outputs the count it started from and its ``CMX_ATTEMPT``: a retry that resumed
    starts above 0 (docs/faults.md, "Checkpoints across attempts")."""
    return textwrap.dedent(f"""\
        name: {name}
        tags: [test, {tag}]
        summary: counts to its input (0.5 s a count), keeping its count in its checkpoint
        cache: false
        inputs:
          x: {{type: integer, default: 0}}
          to: {{type: integer, default: {to}}}
        outputs: [start, attempt]
        steps:
          - uses: shell
            id: count
            checkpoint: true
            with:
              cmd: [sh, -c, 'f="$CMX_CHECKPOINT_DIR/progress"; n=$(cat "$f" 2>/dev/null || echo 0); s=$n;
                     while [ $n -lt "$1" ]; do sleep 0.5; n=$((n+1)); echo $n > "$CMX_CHECKPOINT_DIR/.p.tmp";
                     mv "$CMX_CHECKPOINT_DIR/.p.tmp" "$f"; done; echo "start=$s"; echo "attempt=$CMX_ATTEMPT"',
                    sh, "{{{{ inputs.to }}}}"]
              parse: kv
        """)


def available_faults(kill_worker: bool = False) -> list[FaultKind]:
    """The faults this machine can inject: oom needs a writable memory cgroup, disk-full bwrap,
    partition unshare; ``kill-worker`` when the executor under test kills its workers."""
    found = [kill_step.KIND]
    groups = make_groups(("memory",))
    try:
        if groups.set_memory(64 << 20):
            found.append(oom.KIND)
    finally:
        groups.remove()
    if shutil.which("bwrap"):
        found.append(disk_full.KIND)
    if shutil.which("unshare"):
        found.append(partition.KIND)
    return [*found, KILL_WORKER] if kill_worker else found


@dataclass(frozen=True)
class UnderTest:
    """The executor the chaos matrix runs on: its name, its ``--executor-opt KEY=VALUE``
    pairs, and whether it kills its workers (then the matrix has that cell too)."""

    executor: str
    options: Sequence[str] = ()
    kill_worker: bool = False


def chaos_problems(recipes_dir: Path, under_test: UnderTest, *, env: Mapping[str, str] | None = None,
                   faults: Sequence[str] | None = None, timeout_s: float = 300) -> list[str]:
    """Run the matrix on the executor ``under_test``; the problems found (none: it passed)."""
    executor, options, kill_worker = under_test.executor, under_test.options, under_test.kill_worker
    (recipes_dir / "chaos-matrix.yaml").write_text(chaos_recipe())
    chosen = [FaultKind(f) for f in faults or available_faults(kill_worker)]
    chaos = recipes_dir.parent / f"chaos-{executor}.yaml"
    chaos.write_text("chaos:\n" + "".join(f"  - inject: {FAULTS[f][0]}\n    points: [{i}]\n"
                                          for i, f in enumerate(chosen)))
    base = ["--recipes", str(recipes_dir), "--executor", executor, *(f"--executor-opt={o}" for o in options)]
    sweep = _cmx(["sweep", "--tags", f"test,{CHAOS_TAG}", "--matrix", f"what={','.join(INPUTS[f] for f in chosen)}",
                  "--retries", "1", "--chaos", str(chaos), "--json", *base], env, timeout_s)
    problems = _sweep_problems(sweep, chosen)
    bad = _cmx(["run", "--tags", f"test,{CHAOS_TAG}", "--what=bad", "--retries", "2", "--json", *base],
               env, timeout_s, expect_json=False)
    return problems + _bad_input_problems(bad, executor)


def _cmx(args: list[str], env: Mapping[str, str] | None, timeout_s: float,
         expect_json: bool = True) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})}, check=False)
    try:
        value: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        value = {}
    value["_exit"], value["_stderr"] = proc.returncode, proc.stderr[-2000:]
    if expect_json and "points" not in value:
        raise AssertionError(f"cmx {' '.join(args[:1])} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return value


def _sweep_problems(sweep: Mapping[str, Any], chosen: Sequence[FaultKind]) -> list[str]:
    points = sweep["points"]
    problems = [] if sorted(p["index"] for p in points) == list(range(len(chosen))) else \
        [f"points recorded: {[p['index'] for p in points]}"]
    runs = [p.get("run_id") for p in points]
    if len(set(runs)) != len(runs) or None in runs:
        problems.append(f"each point must have its own run: {runs}")
    for point in points:
        fault = chosen[point["index"]]
        if not point.get("result_path"):
            problems.append(f"point {point['index']} ({fault}) recorded no result: {point}")
            continue
        document = json.loads(Path(point["result_path"]).read_text())
        attempts = [(a["number"], a["fault"]) for a in document.get("attempts") or ()]
        if attempts != [(1, FAULTS[fault][1]), (2, None)]:
            problems.append(f"point {point['index']} ({fault}): attempts {attempts}, want {FAULTS[fault][1]} "
                            f"then success")
        if document["status"] == "error":
            problems.append(f"point {point['index']} ({fault}): {document['error']['message']}")
        spans = [(a["started"], a["ended"]) for a in document.get("attempts") or ()]
        if spans and document["timing"]["wall_s"] + 0.01 < max(e for _, e in spans) - min(b for b, _ in spans):
            problems.append(f"point {point['index']} ({fault}): the run's wall time {document['timing']['wall_s']} s "
                            "does not span its attempts")
        if not any(i["spec"] == FAULTS[fault][0] for i in document["provenance"].get("injections") or ()):
            problems.append(f"point {point['index']} ({fault}): the injection is not in its provenance")
    return problems


def recorded_result(stderr: str) -> dict[str, Any] | None:
    """The result document a failed ``cmx run`` says it recorded (its ``... was recorded in
    PATH`` line on stderr); None when it names none."""
    path = next((line.split(" was recorded in ", 1)[1].strip() for line in stderr.splitlines()
                 if " was recorded in " in line), None)
    if path is None:
        return None
    document: dict[str, Any] = json.loads(Path(path).read_text())
    return document


def _bad_input_problems(run: Mapping[str, Any], executor: str) -> list[str]:
    if run["_exit"] == 0:
        return [f"{executor}: a step exiting 2 succeeded"]
    document = recorded_result(run["_stderr"])
    if document is None:
        return [f"{executor}: no result recorded for the refused input: {run['_stderr']}"]
    faults = [a["fault"] for a in document.get("attempts") or () if a["fault"] is not None]
    return [] if faults == [FaultClass.BAD_INPUT] else \
        [f"{executor}: exit code 2 gave attempts {faults}, want one bad_input"]
