"""`cmx plugins new` produces a plugin whose own tests pass right away, installed the way
its printed next step says (``cmx plugins install --editable 'DIR[test]'``). The fresh-venv variant, with
only cmx-core's wheel and the scaffold installed, runs in tests/test_registry_ci.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx_core.cli.main import main
from cmx_core.testing import IsolatedEnv

pytestmark = pytest.mark.slow

CLI = "import sys; from cmx_core.cli.main import main; sys.exit(main())"


def test_new_plugin_tests_pass_and_its_recipe_runs(
    tmp_path: Path, cmx_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugins", "new", "tiny-bench", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    target = tmp_path / "cmx-tiny-bench"
    assert f"cmx plugins install --editable '{target}[test]'" in " ".join(out.split())  # wrapped to the terminal

    env = IsolatedEnv.create(tmp_path / "venv", inherit=True)
    env.pip("install", "-q", "-e", f"{target}[test]")
    done = env.run_python(["-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=target,
                          env={"CMX_HOME": str(tmp_path / "home")}, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b17 passed\b", done.stdout), done.stdout[-500:]  # the kit: 14 + 2 executor checks + README

    done = env.run_python(["-c", CLI, "run", "recipe", "--tags=tiny-bench,hello",
                           "--who=there", "--json"], env={"CMX_HOME": str(tmp_path / "home")})
    assert json.loads(done.stdout)["outputs"] == {"greeting": "hello there"}

    # the author's first edit: a step without a sample makes the kit fail, naming it
    plugin = target / "src" / "cmx_tiny_bench" / "plugin.py"
    plugin.write_text(plugin.read_text().replace(
        "    )\n\n\n@hookimpl\ndef cmx_recipe_paths",
        "    )\n    register(StepType(name=\"tiny-bench.new\", summary=\"new\", run=_hello))"
        "\n\n\n@hookimpl\ndef cmx_recipe_paths"))
    done = env.run_python(["-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=target,
                          env={"CMX_HOME": str(tmp_path / "home")}, check=False)
    assert done.returncode == 1
    assert "test_every_step_has_a_sample" in done.stdout
    assert "['tiny-bench.new']" in done.stdout
