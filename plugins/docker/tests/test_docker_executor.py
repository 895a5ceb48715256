"""Recipes run inside real containers through the ``docker`` executor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
name: container-probe
tags: [container, probe]
summary: report the user, network interfaces and a file from inside
steps:
  - uses: shell
    with:
      cmd: [python3, -c, "import os, socket; print('uid=%d' % os.getuid());
        print('ifaces=' + ','.join(sorted(n for _, n in socket.if_nameindex())))"]
      parse: kv
outputs: [uid, ifaces]
cache: false
"""

HOG = """
name: container-hog
tags: [container, hog]
summary: allocate far more memory than the limit
steps:
  - uses: shell
    with: {cmd: [python3, -c, "b = b'x' * (600 * 1024 * 1024); print(len(b))"]}
cache: false
"""

FAILING = """
name: container-failing
tags: [container, failing]
summary: a step that fails inside the container
steps:
  - uses: shell
    with: {cmd: [python3, -c, "import sys; print('failing-on-purpose-51c'); sys.exit(3)"]}
cache: false
"""

SLEEPER = """
name: container-sleeper
tags: [container, sleeper]
summary: run past the time limit
steps:
  - uses: shell
    with: {cmd: [sleep, "120"]}
cache: false
"""


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    folder = tmp_path / "recipes"
    folder.mkdir()
    for name, text in (("probe", PROBE), ("hog", HOG), ("sleeper", SLEEPER), ("failing", FAILING)):
        (folder / f"{name}.yaml").write_text(text)
    return folder


def _cmx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core.cli.main", *args], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ), check=False)


def test_detect_os_runs_in_a_container_and_lands_in_the_host_store(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    proc = _cmx("run", "recipe", "--tags=detect,os", "--container", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    from cmx_core.api import validate_document

    validate_document(doc)  # the host's result.json is schema-valid
    container = doc["system"]["container"]
    assert container["image"].startswith("cmx-python:")
    assert container["digest"].startswith("sha256:") and container["runtime"].startswith(engine.kind)
    assert doc["system"]["os"]["distro"] == "Debian GNU/Linux" and doc["system"]["os"]["version"] == "12"
    assert doc["software"]["python"].startswith("3.11")
    shown = _cmx("results", "show", doc["run_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["system"]["container"] == container
    artifact = next(a for a in doc["artifacts"] if a["kind"] == "container")
    (record_path,) = [p for p in Path(os.environ["CMX_HOME"]).rglob(artifact["path"])
                      if p.parent.name.endswith(doc["run_id"][:8])]
    record = json.loads(record_path.read_text())
    assert record["image"]["image_id"] == container["digest"]
    assert record["run"]["network"] is False and record["run"]["user"] != "0:0"


def test_container_runs_as_non_root_without_network(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import run

    result = run("container,probe", recipes_dirs=[recipes], executor="docker")
    assert result.status == "completed"
    assert result.document["outputs"]["uid"] != "0"
    assert result.document["outputs"]["ifaces"] == "lo"
    assert result.result_path == result.run_dir / "result.json"
    assert (result.run_dir / "remote" / "result.json").is_file()


def test_network_option_gives_the_host_network(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import run

    result = run("container,probe", recipes_dirs=[recipes], executor="docker", options={"network": "true"})
    assert result.document["outputs"]["ifaces"] != "lo"


def test_oom_killed_container_is_reported(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import StepFailed, run

    with pytest.raises(StepFailed, match=r"OOM-killed \(memory limit 160m\); raise the memory option") as err:
        run("container,hog", recipes_dirs=[recipes], executor="docker", options={"memory": "160m"})
    doc = json.loads(Path(err.value.result_path).read_text())  # type: ignore[attr-defined]
    assert doc["status"] == "error" and doc["system"]["container"]["image"].startswith("cmx-python:")


def test_container_past_its_time_limit_is_killed(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import StepFailed, run

    with pytest.raises(StepFailed, match=r"exceeded its time limit of 4 s and was killed") as err:
        run("container,sleeper", recipes_dirs=[recipes], executor="docker", options={"timeout_s": "4"})
    assert json.loads(Path(err.value.result_path).read_text())["status"] == "error"  # type: ignore[attr-defined]


def test_unknown_executor_option_is_refused(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import UsageError, run

    with pytest.raises(UsageError, match=r"docker executor: unknown option 'memroy'; did you mean 'memory'\?"):
        run("container,probe", recipes_dirs=[recipes], executor="docker", options={"memroy": "1g"})


def test_cpu_benchmark_recipe_runs_in_a_container(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    proc = _cmx("run", "recipe", "--tags=demo,sort,benchmark", "--container", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["status"] == "valid" and doc["metrics"]
    assert doc["system"]["container"]["image"].startswith("cmx-python:")
    assert doc["system"]["container"]["digest"].startswith("sha256:")


def test_failing_step_inside_is_recorded_and_fails_the_run(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import StepFailed, run

    with pytest.raises(StepFailed) as err:
        run("container,failing", recipes_dirs=[recipes], executor="docker")
    result_path = Path(err.value.result_path)  # type: ignore[attr-defined]
    doc = json.loads(result_path.read_text())
    assert doc["status"] == "error" and doc["system"]["container"]["image"].startswith("cmx-python:")
    assert result_path.parent.joinpath("container.log").is_file()
