"""`cmx plugins list|search|info|install|uninstall|new` through the real CLI entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cmx_core.cli.main import main
from cmx_core.cli.plugins_cmd import Scaffold, core_requirement
from cmx_core.plugins import loader as plugins

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_registry(cmx_home: Path):
    plugins.reset_registry()
    yield
    plugins.reset_registry()


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_plain_plugins_lists_core_and_installed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cmx-core")
    assert "steps: cmx.facts, python, shell" in " ".join(out.split())  # wrapped to the terminal's width
    assert "launchers: env, mpirun, none, torchrun" in " ".join(out.split())


def test_list_json_has_versions_hooks_and_provides(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "list")
    assert code == 0
    core = next(p for p in doc["plugins"] if p["name"] == "cmx-core")
    assert core["version"] == "0.1.0" and core["error"] is None
    assert "cmx_register_steps" in core["hooks"]
    assert core["provides"]["executors"] == ["local"]
    assert doc["conflicts"] == {}


def test_list_shows_capabilities(
    cmx_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from cmx_core.api import Capabilities, StepType, hookimpl

    @hookimpl
    def cmx_register_steps(register):
        register(StepType(name="gpu.burn", summary="s", run=lambda ctx: {},
                          capabilities=Capabilities(needs_gpu=True, needs_root=True)))

    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(
        extra=[("burner", SimpleNamespace(cmx_register_steps=cmx_register_steps))]))
    code, doc = _json(capsys, "plugins", "list")
    assert code == 0
    burner = next(p for p in doc["plugins"] if p["name"] == "burner")
    assert burner["capabilities"] == {"gpu.burn": ["needs_gpu", "needs_root"]}
    assert main(["plugins"]) == 0
    assert "needs     gpu.burn: needs_gpu, needs_root" in capsys.readouterr().out


def test_search_finds_by_summary_and_provided_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "search", "loadgen")
    assert code == 0
    assert [r["name"] for r in doc["results"]] == ["cmx-mlperf"]
    code, doc = _json(capsys, "plugins", "search", "GPU")
    assert "cmx-detect" in [r["name"] for r in doc["results"]]
    assert main(["plugins", "search", "no-such-thing-anywhere"]) == 0
    assert "no plugin in the registry matches" in capsys.readouterr().out


def test_info_of_an_entry(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "info", "cmx-docker")
    assert code == 0
    assert doc["source"] == {"path": "plugins/docker"}
    assert doc["provides"]["executors"] == ["docker"]
    assert doc["install"] == "cmx plugins install cmx-docker"
    assert main(["plugins", "info", "cmx_Docker"]) == 0  # distribution spelling is normalised
    assert "state       incubating" in capsys.readouterr().out


def test_info_shows_each_executor_setting_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    from cmx_docker.settings import DockerSettings

    assert main(["plugins", "info", "cmx-docker", "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["executor_settings"]["docker"]
    assert [s["name"] for s in settings] == list(DockerSettings.__dataclass_fields__)
    memory = next(s for s in settings if s["name"] == "memory")
    assert memory == {"name": "memory", "type": "str | None", "default": "None", "help": "memory limit, e.g. 8g"}
    assert main(["plugins", "info", "cmx-docker", "--wide"]) == 0  # one line a setting (at 80 columns they wrap)
    text = capsys.readouterr().out
    assert "executor docker: --executor-opt KEY=VALUE" in text and "kill the container after this many seconds" in text


@pytest.mark.parametrize("verb", ["info", "install", "uninstall"])
def test_unknown_name_is_one_line_exit_2(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", verb, "cmx-nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("cmx: error:") and "'cmx-nope'" in err


def test_install_dry_run_installs_in_tree_from_the_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = _json(capsys, "plugins", "install", "cmx-textstats", "--dry-run")
    assert code == 0
    # hatchling (the in-tree build backend) is here: pip builds without isolation, needing no index
    assert doc["command"] == [sys.executable, "-m", "pip", "install",
                              "--disable-pip-version-check", "--no-build-isolation",
                              str(ROOT / "examples" / "cmx-textstats")]
    code, doc = _json(capsys, "plugins", "install", "cmx-mlperf", "--dry-run", "--editable")
    assert doc["command"][-2:] == ["--editable", str(ROOT / "plugins" / "mlperf")]


def test_install_from_an_index_entry_uses_the_version_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "r.yaml").write_text(
        "schema_version: 1\nplugins:\n  - {name: cmx-acme, distribution: cmx-acme, summary: s,"
        " source: {index: cmx-acme, version: '>=1.2,<2'}, provides: {}, cmx_core: '>=0.1',"
        " state: stable, license: MIT, maintainers: [{name: m}]}\n", encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(tmp_path / "r.yaml"))
    code, doc = _json(capsys, "plugins", "install", "cmx-acme", "--dry-run", "--upgrade")
    assert code == 0
    assert doc["command"][-2:] == ["--upgrade", "cmx-acme>=1.2,<2"]


def test_in_tree_entry_without_a_checkout_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "registry.yaml").write_text(
        (ROOT / "registry.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(tmp_path / "registry.yaml"))
    assert main(["plugins", "install", "cmx-detect", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "cmx-detect is an in-tree plugin (plugins/detect)" in err
    assert "install from a cmx checkout" in err


@pytest.mark.parametrize("name", ["cmx-docker", "cmx_Docker", "docker"])
def test_uninstall_dry_run_by_registry_distribution_or_entry_point_name(
    name: str, capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = _json(capsys, "plugins", "uninstall", name, "--dry-run")
    assert code == 0 and doc["command"][-2:] == ["-y", "cmx-docker"]


def test_uninstalling_a_plugin_that_is_not_installed_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "uninstall", "cmx-textstats"]) == 2  # in the registry, not installed here
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'cmx-textstats' is not installed, so there is nothing to uninstall" in err
    assert "uninstalled" not in err


def test_info_accepts_the_entry_point_name_plugins_list_shows(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "info", "detect")
    assert code == 0 and doc["name"] == "cmx-detect" and doc["installed"] == "0.1.0"


def test_extras_are_passed_to_pip_and_unknown_ones_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "install", "cmx-mlperf[llm]", "--dry-run")
    assert code == 0 and doc["command"][-1] == f"{ROOT / 'plugins' / 'mlperf'}[llm]"
    assert main(["plugins", "install", "cmx-mlperf[lm]", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "cmx-mlperf has no extra 'lm'" in err and "llm" in err


def test_printed_commands_are_shell_quoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    code, doc = _json(capsys, "plugins", "install", "cmx-mlperf[llm]", "--dry-run")
    assert code == 0
    assert shlex.split(doc["shell"]) == doc["command"]  # '[llm]' is a glob to a shell: quoted
    assert "'" in doc["shell"]


def test_offline_without_the_build_backend_names_it(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from cmx_core.plugins import install as plugin_install

    monkeypatch.setattr(plugin_install, "backend_available", lambda: False)  # a venv without hatchling
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert main(["plugins", "install", "cmx-textstats", "--dry-run"]) == 2
    assert "in-tree plugins build with hatchling, which is not installed here" in capsys.readouterr().err
    monkeypatch.delenv("PIP_NO_INDEX")
    code, doc = _json(capsys, "plugins", "install", "cmx-textstats", "--dry-run")
    assert code == 0 and "--no-build-isolation" not in doc["command"]  # pip fetches hatchling itself


def test_missing_plugins_subcommand_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "install"]) == 2
    assert "the following arguments are required: NAME" in capsys.readouterr().err


# --------------------------------------------------------------------------- new


def test_new_scaffolds_the_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "plugins", "new", "acme-gpu", "--dir", str(tmp_path))
    assert code == 0
    target = tmp_path / "cmx-acme-gpu"
    assert doc["path"] == str(target)
    assert sorted(doc["files"]) == [
        "README.md", "pyproject.toml", "src/cmx_acme_gpu/__init__.py",
        "src/cmx_acme_gpu/plugin.py", "src/cmx_acme_gpu/recipes/acme-gpu-hello.yaml",
        "tests/test_acme_gpu_conformance.py", "tests/test_acme_gpu_hello.py"]
    pyproject = (target / "pyproject.toml").read_text()
    assert '[project.entry-points.cmx]\nacme-gpu = "cmx_acme_gpu.plugin"' in pyproject
    assert f'dependencies = ["cmx-core{core_requirement()}"]' in pyproject
    recipe = (target / "src/cmx_acme_gpu/recipes/acme-gpu-hello.yaml").read_text()
    assert 'with: {who: "{{ inputs.who }}"}' in recipe
    compile((target / "src/cmx_acme_gpu/plugin.py").read_text(), "plugin.py", "exec")


def test_new_validates_the_recipe_with_cmx(tmp_path: Path) -> None:
    from cmx_core.recipes.load import load_recipe_file

    target = tmp_path / "cmx-demo"
    assert main(["plugins", "new", "cmx-demo", "--dir", str(tmp_path)]) == 0
    recipe = load_recipe_file(target / "src/cmx_demo/recipes/demo-hello.yaml")
    assert recipe.tags == ("demo", "hello")
    assert [s.uses for s in recipe.steps] == ["demo.hello"]


@pytest.mark.parametrize("name", ["Bad_Name", "1abc", "a--b", "", "cmx-"])
def test_new_refuses_bad_names(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "new", name, "--dir", str(tmp_path)]) == 2
    assert "use lower-case words joined by '-'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_new_refuses_a_non_empty_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cmx-x").mkdir()
    (tmp_path / "cmx-x" / "keep.txt").write_text("mine")
    assert main(["plugins", "new", "x", "--dir", str(tmp_path)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "cmx-x").iterdir()] == ["keep.txt"]


def test_scaffold_names() -> None:
    names = Scaffold.from_name("cmx-acme-gpu")
    assert (names.short, names.distribution, names.package) == (
        "acme-gpu", "cmx-acme-gpu", "cmx_acme_gpu")
    assert core_requirement() == ">=0.1,<0.2"
