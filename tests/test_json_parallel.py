"""`cmx run … -j 4 --json` prints exactly one JSON document on stdout, 100 times out of 100,
while four parallel steps write to stdout from Python, from the raw descriptor and from
child processes that inherit it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NOISY = '''\
"""Steps that write to stdout every way a plugin's code can."""
import os
import subprocess
import sys


def shout(ctx):
    print(f"print from {ctx.node_id}")
    sys.stdout.write(f"sys.stdout from {ctx.node_id}\\n")
    sys.stdout.flush()
    os.write(1, f"fd 1 from {ctx.node_id}\\n".encode())
    subprocess.run(["echo", f"child of {ctx.node_id}"], check=True)
    return {"said": ctx.node_id}
'''

LEAF = """\
name: noisy-{i}
tags: [noisy, leaf{i}]
summary: writes to stdout
steps:
  - uses: python
    with: {{function: "noisy_steps:shout"}}
  - uses: shell
    with: {{cmd: [sh, -c, "echo shell {i}; echo shell-err {i} >&2"]}}
outputs:
  said: {{}}
cache: false
"""

ROOT = """\
name: noisy-root
tags: [noisy, root]
summary: four noisy deps that can run in parallel
deps:
{deps}
steps:
  - uses: python
    with: {{function: "noisy_steps:shout"}}
outputs:
  said: {{}}
cache: false
"""


def _write_recipes(folder: Path) -> None:
    (folder / "noisy_steps.py").write_text(NOISY)
    recipes = folder / "recipes"
    recipes.mkdir()
    for i in range(4):
        (recipes / f"leaf{i}.yaml").write_text(LEAF.format(i=i))
    deps = "\n".join(f"  - {{tags: [noisy, leaf{i}], as: l{i}}}" for i in range(4))
    (recipes / "root.yaml").write_text(ROOT.format(deps=deps))


def _run(folder: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home), "PYTHONPATH": str(folder), "CMX_NO_REPLAY": "1"}
    return subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=noisy,root", "-j", "4",
                           "--json", "--recipes", str(folder / "recipes")], capture_output=True, text=True,
                          env=env, timeout=300, check=False, stdin=subprocess.DEVNULL)


def test_json_holds_under_parallel_noisy_steps(tmp_path: Path) -> None:
    _write_recipes(tmp_path)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda i: _run(tmp_path, tmp_path / f"home{i % 2}"), range(100)))
    bad = [(p.returncode, p.stdout[:200], p.stderr[-300:]) for p in done
           if p.returncode != 0 or not p.stdout.startswith("{")]
    assert bad == [], f"{len(bad)} of 100 runs broke stdout; first: {bad[:1]}"
    for proc in done:
        document = json.loads(proc.stdout)  # the whole of stdout is one document
        assert document["outputs"] == {"said": "noisy-root"}
        assert "fd 1 from noisy-root" in proc.stderr and "child of noisy-root" in proc.stderr
        assert "shell 0" not in proc.stderr  # a shell step's output goes to its own log files


def test_without_json_stdout_holds_only_the_summary(tmp_path: Path) -> None:
    _write_recipes(tmp_path)
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home"), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=noisy,root", "-j", "4",
                           "--recipes", str(tmp_path / "recipes")], capture_output=True, text=True, env=env,
                          timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("COMPLETED  noisy-root"), proc.stdout
    assert "from noisy" not in proc.stdout and "child of" not in proc.stdout
    assert "print from noisy-0" in proc.stderr and "child of noisy-root" in proc.stderr  # node ids
