"""The worked third-party example (examples/cmx-textstats), installed with `cmx plugins
install` from the checkout into a throwaway environment, passes its own tests (the
conformance kit among them) and is used by its recipe through `cmx run`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx_core.testing import IsolatedEnv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cmx-textstats"
CLI = "import sys; from cmx_core.cli.main import main; sys.exit(main())"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> IsolatedEnv:
    env = IsolatedEnv.create(tmp_path_factory.mktemp("example") / "venv", inherit=True)
    home = tmp_path_factory.mktemp("home")
    done = env.run_python(["-c", CLI, "plugins", "install", "cmx-textstats", "--json"],
                          env={"CMX_HOME": str(home)})
    installed = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}
    assert installed["textstats"]["error"] is None
    assert installed["textstats"]["provides"] == {"detectors": ["text_encoding"],
                                                  "steps": ["textstats.count", "textstats.top"]}
    return env


def test_the_example_imports_only_the_public_api() -> None:
    sources = "\n".join(p.read_text() for p in (EXAMPLE / "src").rglob("*.py"))
    imported = set(re.findall(r"^\s*(?:from|import) (cmx_core[\w.]*)", sources, re.MULTILINE))
    assert imported == {"cmx_core.api"}


def test_the_example_passes_its_own_tests(env: IsolatedEnv, tmp_path: Path) -> None:
    done = env.run_python(["-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "--import-mode=importlib", "--rootdir", str(EXAMPLE),
                           str(EXAMPLE / "tests")], env={"CMX_HOME": str(tmp_path)}, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    # its own 9 tests and the kit's 14 (the two executor checks included)
    assert re.search(r"\b23 passed\b", done.stdout), done.stdout[-500:]


def test_a_recipe_uses_the_example_plugin(env: IsolatedEnv, tmp_path: Path) -> None:
    text = tmp_path / "words.txt"
    text.write_text("alpha beta\ngamma\n", encoding="utf-8")
    done = env.run_python(["-c", CLI, "run", "recipe", "--tags=textstats,count",
                           f"--path={text}", "--json"], env={"CMX_HOME": str(tmp_path / "h")})
    doc = json.loads(done.stdout)
    assert doc["status"] == "completed"
    assert doc["outputs"] == {"lines": 2, "words": 3, "bytes": 17}
    assert doc["benchmark"]["task"] == "textstats.count"
    assert doc["metrics"]["bytes"] == {"value": 17, "unit": "bytes", "higher_is_better": True}


def test_a_missing_file_fails_the_run_with_one_line(env: IsolatedEnv, tmp_path: Path) -> None:
    done = env.run_python(["-c", CLI, "run", "recipe", "--tags=textstats,count",
                           f"--path={tmp_path / 'nope.txt'}"],
                          env={"CMX_HOME": str(tmp_path / "h")}, check=False)
    assert done.returncode == 1
    assert "cannot read" in done.stderr and "nope.txt" in done.stderr
    assert "Traceback" not in done.stderr
