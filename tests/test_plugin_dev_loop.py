"""docs/plugins.md's development venv, followed as written: `cmx plugins wheelhouse` makes a
folder of wheels from this checkout, a fresh venv (not cmx's .venv) gets cmx-core from it
with the index off, `cmx plugins new --suite` scaffolds a
third-party suite, `cmx plugins install --editable` installs it offline, its conformance kit
and README check pass, and the recipe runs to a valid, measured result.

Only the wheelhouse is made with an index reachable (its `pip download`, from pip's cache or
the index), once per module, as docs/plugins.md says to; the venv's commands run with
``PIP_NO_INDEX=1``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "plugins.md"
TIMEOUT_S = 600
BLOCK = re.compile(r"<!-- dev-venv commands -->\n```sh\n(.*?)```\n<!-- /dev-venv commands -->", re.S)
WHEELS = re.compile(r"<!-- wheelhouse commands -->\n```sh\n(.*?)```\n<!-- /wheelhouse commands -->", re.S)


def _clean_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("CMX_", "PIP_", "VIRTUAL_ENV")) and k not in ("PYTHONPATH", "HOME")}
    return {**keep, **extra}


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n"
                             f"{done.stderr[-4000:]}")
    return done


def doc_commands() -> str:
    found = BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found, "docs/plugins.md lost its dev-venv commands block"
    return found[1]


def wheelhouse_commands() -> str:
    found = WHEELS.search(DOC.read_text(encoding="utf-8"))
    assert found, "docs/plugins.md lost its wheelhouse commands block"
    return found[1]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def wheelhouse(home: Path) -> Path:
    """The doc's wheelhouse command, run as written with this checkout's cmx (first on PATH),
    the index reachable (or pip's cache)."""
    env = _clean_env(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                     PIP_DISABLE_PIP_VERSION_CHECK="1", CMX_HOME=str(home / "cmx"))
    _run(["bash", "-c", "set -euo pipefail\n" + wheelhouse_commands()], env, home)
    return home / "wheels"


@pytest.fixture(scope="module")
def dev_loop(home: Path, wheelhouse: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    env = _clean_env(HOME=str(home), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse),
                     PIP_DISABLE_PIP_VERSION_CHECK="1", CMX_HOME=str(home / "cmx"))
    script = "set -euo pipefail\n" + doc_commands()
    return home, _run(["bash", "-c", script], env, home)


def _last_json(stdout: str) -> dict:
    start = stdout.rindex("\n{\n") + 1 if "\n{\n" in stdout else stdout.index("{")
    return json.loads(stdout[start:])


def test_the_doc_block_is_the_loop_it_describes() -> None:
    commands = doc_commands()
    assert "python3 -m venv ~/venvs/cmx-dev" in commands and "--suite" in commands
    assert "cmx plugins install --editable" in commands and "python -m pytest" in commands
    assert "pip install cmx-core" not in commands  # not on the index: the venv gets it from the wheelhouse
    assert "cmx plugins wheelhouse ~/wheels" in wheelhouse_commands()


def test_the_wheelhouse_holds_core_and_what_it_needs(wheelhouse: Path) -> None:
    names = [p.name for p in wheelhouse.glob("*.whl")]
    assert any(n.startswith("cmx_core-") for n in names) and any(n.startswith("pytest-") for n in names)
    assert any(n.startswith("hatchling-") for n in names)  # cmx-core's dependency, the scaffold's backend


def test_the_scaffolded_suite_passes_the_kit_in_its_own_venv(dev_loop) -> None:
    _, done = dev_loop
    summary = re.search(r"(\d+) passed", done.stdout)
    assert summary and int(summary[1]) >= 15 and " failed" not in done.stdout and " error" not in done.stdout
    assert "Traceback" not in done.stderr


def test_the_venv_sees_core_from_its_wheel_and_the_plugin_from_its_sources(dev_loop) -> None:
    home, _ = dev_loop
    python = home / "venvs" / "cmx-dev" / "bin" / "python"
    where = _run([str(python), "-c", "import cmx_core, cmx_acme_bench; print(cmx_core.__file__); "
                  "print(cmx_acme_bench.__file__)"], _clean_env(HOME=str(home)), home).stdout.splitlines()
    assert where[0].startswith(str(home / "venvs" / "cmx-dev")) and str(ROOT) not in where[0]
    assert where[1] == str(home / "src" / "cmx-acme-bench" / "src" / "cmx_acme_bench" / "__init__.py")
    mine = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import cmx_acme_bench"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert mine.returncode != 0  # cmx's own environment is untouched


def test_the_suite_recipe_runs_to_a_valid_measured_result(dev_loop) -> None:
    _, done = dev_loop
    result = _last_json(done.stdout)
    assert result["status"] == "valid" and result["benchmark"]["suite"] == "acme-bench"
    assert result["metrics"]["items_per_second"]["unit"] == "items/s"
    assert result["metrics"]["items_per_second"]["value"] > 0
    assert result["acme_bench"]["size"] == 20000 and len(result["acme_bench"]["timings_s"]) == 3
    assert not {"mlperf_name", "availability", "division"} & set(result["benchmark"])


def test_an_edit_is_seen_without_a_reinstall(dev_loop) -> None:
    home, _ = dev_loop
    measure = home / "src" / "cmx-acme-bench" / "src" / "cmx_acme_bench" / "measure.py"
    measure.write_text(measure.read_text().replace('WORKLOAD = "sum-of-squares"', 'WORKLOAD = "edited"'))
    python = home / "venvs" / "cmx-dev" / "bin" / "python"
    done = _run([str(python), "-c", "from cmx_acme_bench.measure import WORKLOAD; print(WORKLOAD)"],
                _clean_env(HOME=str(home)), home)
    assert done.stdout.strip() == "edited"
