"""Load problems are visible: a plugin that fails to import, or whose registration hook
raises, is a one-line warning on every command that loads plugins (naming it and `cmx
plugins info NAME`, which shows the traceback), strict mode lists every failure,
CMX_DISABLE_PLUGINS turns one off, a misspelt CMX_LOAD_PLUGINS name is a warning, and `cmx
plugins list` shows each import time and names a plugin over 100 ms.

The plugins are real distributions to importlib.metadata: a site directory on PYTHONPATH with
their ``*.dist-info`` (METADATA, entry_points.txt) and modules, loaded by a cmx subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cmx_core.plugins import loader as plugins

CLI = "import sys; from cmx_core.cli.main import main; sys.exit(main())"

SLOW = """\
import time
from cmx_core.api import StepType, hookimpl

time.sleep(0.3)  # a heavy import at module level


@hookimpl
def cmx_register_steps(register):
    register(StepType(name="slowpoke.nop", summary="nothing", run=lambda ctx: {}))
"""

BROKEN = """\
def _setup():
    raise ImportError("libfoo.so.1: cannot open shared object file")


_setup()
"""


FAILS_TO_REGISTER = """\
from cmx_core.api import hookimpl


@hookimpl
def cmx_register_steps(register):
    raise RuntimeError("step table is corrupt")
"""


def _distribution(site: Path, name: str, module: str) -> None:
    package = f"cmx_{name}"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("", encoding="utf-8")
    (site / package / "plugin.py").write_text(module, encoding="utf-8")
    info = site / f"{package}-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(textwrap.dedent(f"""\
        Metadata-Version: 2.1
        Name: cmx-{name}
        Version: 0.2.0
        Requires-Dist: cmx-core>=0.1,<0.2
        """), encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[cmx]\n{name} = {package}.plugin\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    _distribution(site, "slowpoke", SLOW)
    _distribution(site, "broken", BROKEN)
    _distribution(site, "alsobroken", "import cmx_no_such_dependency\n")
    _distribution(site, "badhook", FAILS_TO_REGISTER)
    return site


def cmx(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
    merged.update(PYTHONPATH=str(site), CMX_HOME=str(site.parent / "home"), **env)
    return subprocess.run([sys.executable, "-c", CLI, *args], env=merged, capture_output=True, text=True,
                          timeout=300, check=False, cwd=site.parent)


def test_a_failed_plugin_is_a_one_line_warning_on_a_run(site: Path) -> None:
    done = cmx(site, "run", "recipe", "--tags=detect,os", "--json")
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # stdout stays one JSON document
    lines = [line for line in done.stderr.splitlines() if "'broken'" in line]
    assert lines == ["cmx: warning: plugin 'broken' (cmx-broken 0.2.0) failed to load: ImportError: libfoo.so.1: "
                     "cannot open shared object file; `cmx plugins info broken` shows the traceback"]
    assert "Traceback" not in done.stderr


def test_a_plugin_whose_registration_hook_fails_is_a_one_line_warning_on_a_run(site: Path) -> None:
    done = cmx(site, "run", "recipe", "--tags=detect,os", "--json")  # imports fine; fails once steps are asked for
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    lines = [line for line in done.stderr.splitlines() if "'badhook'" in line]
    assert lines == ["cmx: warning: plugin 'badhook' (cmx-badhook 0.2.0) failed to load: RuntimeError: step table "
                     "is corrupt; `cmx plugins info badhook` shows the traceback"]
    info = json.loads(cmx(site, "plugins", "info", "badhook", "--json").stdout)
    assert "in cmx_register_steps" in info["traceback"]


def test_plugins_info_shows_the_traceback(site: Path) -> None:
    done = cmx(site, "plugins", "info", "broken", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["error"] == "ImportError: libfoo.so.1: cannot open shared object file"
    assert "Traceback (most recent call last)" in doc["traceback"]
    assert "in _setup" in doc["traceback"] and "cmx_broken/plugin.py" in doc["traceback"]
    text = cmx(site, "plugins", "info", "broken").stdout
    assert "ERROR       ImportError" in text and "in _setup" in text


def test_strict_mode_lists_every_failure(site: Path) -> None:
    done = cmx(site, "plugins", "list", "--strict-plugins")
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if line.startswith("cmx: error:")]
    assert len(error) == 1
    assert "3 plugins failed to load (strict plugin mode)" in error[0]
    assert "'alsobroken': ModuleNotFoundError" in error[0] and "'broken': ImportError" in error[0]
    assert "'badhook': RuntimeError: step table is corrupt" in error[0]


def test_disable_plugins_turns_single_plugins_off(site: Path) -> None:
    done = cmx(site, "plugins", "list", "--json", CMX_DISABLE_PLUGINS="broken,alsobroken,badhook")
    assert done.returncode == 0, done.stderr
    names = {p["name"] for p in json.loads(done.stdout)["plugins"]}
    assert "slowpoke" in names and not names & {"broken", "alsobroken", "badhook"}
    assert "failed to load" not in done.stderr


def test_a_misspelt_plugin_name_is_a_warning(site: Path) -> None:
    done = cmx(site, "plugins", "list", "--json", CMX_LOAD_PLUGINS="slowpok")
    assert done.returncode == 0
    assert "cmx: warning: CMX_LOAD_PLUGINS names 'slowpok', which is not installed" in done.stderr
    done = cmx(site, "plugins", "list", "--json", CMX_DISABLE_PLUGINS="brokn")
    assert "cmx: warning: CMX_DISABLE_PLUGINS names 'brokn', which is not installed" in done.stderr
    done = cmx(site, "plugins", "list", CMX_LOAD_PLUGINS="slowpok", CMX_STRICT_PLUGINS="1")
    assert done.returncode == 2 and "CMX_LOAD_PLUGINS names 'slowpok'" in done.stderr


def test_plugins_list_shows_import_times_and_names_a_slow_plugin(site: Path) -> None:
    done = cmx(site, "plugins", "list", "--json")
    listed = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}
    assert listed["slowpoke"]["import_ms"] >= 300  # it sleeps 0.3 s at import
    assert listed["cmx-core"]["import_ms"] is None  # built in, not imported through an entry point
    assert "cmx: warning: plugin 'slowpoke' takes" in done.stderr and "ms to import" in done.stderr
    text = cmx(site, "plugins", "list").stdout
    assert any(line.startswith("slowpoke") and "(import " in line for line in text.splitlines())


def test_disable_plugins_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_DISABLE_PLUGINS", "")  # restored after the test
    plugins.disable_plugins(["docker"])
    plugins.disable_plugins(["mlperf", "docker"])
    assert os.environ["CMX_DISABLE_PLUGINS"] == "docker,mlperf"
    assert "docker" not in plugins.get_registry().plugins
