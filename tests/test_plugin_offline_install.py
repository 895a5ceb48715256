"""`PIP_NO_INDEX=1 cmx plugins install cmx-textstats` in a fresh virtual environment that holds
only the cmx-core wheel (built here) and its dependencies from a local wheelhouse: no index at
install time. On that wheel install the shipped registry passes `cmx registry check`, and the
install command `cmx plugins info` suggests is the one that works.

The wheelhouse is filled once per session (`pip download`, from pip's cache or the index);
everything after that runs with the index turned off."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600


def _run(args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith(("CMX_", "PIP_")) and k != "PYTHONPATH"}
    done = subprocess.run(args, env={**merged, **(env or {})}, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        raise AssertionError(f"{shlex.join(args)} exited {done.returncode}:\n{output}")
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the cmx-core wheel, its dependencies and hatchling, installed offline."""
    house = tmp_path_factory.mktemp("wheelhouse")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(house), str(ROOT)])
    wheel = next(house.glob("cmx_core-*.whl"))
    _run([*pip, "download", "--quiet", "--dest", str(house), str(wheel), "hatchling>=1.24"])
    root = tmp_path_factory.mktemp("fresh") / "venv"
    _run([sys.executable, "-m", "venv", str(root)])
    _run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(house),
          "cmx-core", "hatchling"])
    return root


def cmx(venv: Path, home: Path, *args: str, env: dict[str, str] | None = None,
        check: bool = False) -> subprocess.CompletedProcess[str]:
    return _run([str(venv / "bin" / "cmx"), *args], env={"CMX_HOME": str(home), "PIP_NO_INDEX": "1", **(env or {})},
                cwd=home.parent, check=check)


def test_the_fresh_venv_has_no_plugin_and_no_checkout(venv: Path, tmp_path: Path) -> None:
    done = cmx(venv, tmp_path / "h", "plugins", "list", "--json", check=True)
    assert [p["name"] for p in json.loads(done.stdout)["plugins"]] == ["cmx-core"]
    where = _run([str(venv / "bin" / "python"), "-c", "import cmx_core; print(cmx_core.__file__)"], cwd=tmp_path).stdout
    assert str(venv) in where and str(ROOT) not in where


def test_the_shipped_registry_passes_its_check_on_a_wheel_install(venv: Path, tmp_path: Path) -> None:
    done = cmx(venv, tmp_path / "h", "registry", "check", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["problems"]
    assert report["ok"] and report["entries"] >= 10 and report["packaged"]
    assert report["path"].startswith(str(venv))


def test_the_suggested_command_installs_offline_and_the_plugin_runs(venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "h"
    info = json.loads(cmx(venv, home, "plugins", "info", "cmx-textstats", "--json", check=True).stdout)
    suggested = info["install"]
    assert suggested == "CMX_REGISTRY=CHECKOUT/registry.yaml cmx plugins install cmx-textstats"
    words = shlex.split(suggested.replace("CHECKOUT", shlex.quote(str(ROOT))))
    assignments = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    command = [w for w in words if w not in {f"{k}={v}" for k, v in assignments.items()}]
    assert command[0] == "cmx"
    done = cmx(venv, home, *command[1:], "--json", env=assignments)  # PIP_NO_INDEX=1: no index
    assert done.returncode == 0, done.stderr[-3000:]
    plugins = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}
    assert plugins["textstats"]["error"] is None
    assert plugins["textstats"]["distribution"] == "cmx-textstats"

    text = tmp_path / "words.txt"
    text.write_text("alpha beta\ngamma\n", encoding="utf-8")
    done = cmx(venv, home, "run", "recipe", "--tags=textstats,count", f"--path={text}", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["outputs"] == {"lines": 2, "words": 3, "bytes": 17}
