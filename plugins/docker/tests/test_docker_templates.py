"""Templates, content digests, run options and bad input — no engine needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx_core.errors import CmxError, UsageError
from cmx_core.testing import execution_request
from cmx_core.testing.runs import far_arguments
from cmx_docker import context, runopts, templates
from cmx_docker.base import apt_mirror
from cmx_docker.build import ImageRecord
from cmx_docker.digests import DigestMemo
from cmx_docker.engine import find_endpoint
from cmx_docker.errors import (
    ContextError,
    EngineUnavailable,
    ImageUnavailable,
    TemplateError,
)
from cmx_docker.executor import DockerExecutor, container_plan, plan_accelerator
from cmx_docker.settings import DockerSettings

TINY_META = "base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\n"


def spec(name: str, accelerator: str | None = None) -> context.ImageSpec:
    """Render through the persistent memo, as the executor does."""
    from cmx_core.api import cache_dir

    memo = DigestMemo(cache_dir() / "docker" / "digests.json")
    rendered = context.image_spec(name, None, memo, accelerator)
    memo.save()
    return rendered


@pytest.mark.parametrize("name", ["python", "cpu-torch", "cuda-torch", "vllm"])
def test_every_template_renders_pinned_and_from_local_wheels(name: str, home: Path) -> None:
    rendered = spec(name)
    assert rendered.dockerfile.startswith("FROM cmx-base:bookworm-minbase\n")
    assert "pip install --no-index" in rendered.dockerfile
    assert "USER 1000:1000" in rendered.dockerfile
    lines = rendered.requirements.splitlines()
    assert lines[0] == "cmx-core==0.1.0"
    assert all("==" in line for line in lines)
    assert rendered.tag == f"cmx-{name}:{rendered.digest[:24]}"
    assert name in templates.available()


@pytest.mark.parametrize(("accelerator", "arch"), [("h100", "9.0"), ("h200", "9.0"), ("a100", "8.0")])
@pytest.mark.parametrize("name", ["cuda-torch", "vllm"])
def test_gpu_variations_render_the_accelerator_arch(name: str, accelerator: str, arch: str, home: Path) -> None:
    rendered = spec(name, accelerator)
    assert f'ENV TORCH_CUDA_ARCH_LIST="{arch}"' in rendered.dockerfile
    assert f'org.cmx.cuda-arch="{arch}"' in rendered.dockerfile
    assert "NVIDIA_VISIBLE_DEVICES=all" in rendered.dockerfile
    assert ("vllm==0.10.1.1" if name == "vllm" else "torch==2.7.1") in rendered.requirements


def test_same_inputs_same_tag_and_accelerator_changes_it(home: Path) -> None:
    assert spec("cuda-torch", "h100").tag == spec("cuda-torch", "h100").tag
    assert spec("cuda-torch", "h100").tag == spec("cuda-torch", "h200").tag  # both sm 9.0
    assert spec("cuda-torch", "h100").tag != spec("cuda-torch", "a100").tag


def test_changing_a_context_file_changes_the_tag(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    folder = make_template("ctx", "FROM {{ base }}\nCOPY data.txt /data.txt\n",
                           TINY_META + "context: [data.txt]\n", {"data.txt": "one\n"})
    first = spec("ctx").tag
    assert spec("ctx").tag == first
    (folder / "data.txt").write_text("two\n")
    assert spec("ctx").tag != first


def test_editing_the_dockerfile_template_changes_the_tag(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    folder = make_template("edit", "FROM {{ base }}\nRUN true\n", TINY_META)
    first = spec("edit")
    assert spec("edit").tag == first.tag  # second time from the remembered rendering
    (folder / "Dockerfile.j2").write_text("FROM {{ base }}\nRUN true && true\n")
    second = spec("edit")
    assert second.tag != first.tag and "RUN true && true" in second.dockerfile


def test_undefined_variable_names_file_and_line(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("bad", "FROM {{ base }}\nRUN echo {{ no_such_thing }}\n", TINY_META)
    with pytest.raises(TemplateError, match=r"bad/Dockerfile.j2:2: failed to render: 'no_such_thing' is undefined"):
        spec("bad")


def test_syntax_error_names_file_and_line(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("broken", "FROM {{ base }}\n{% if %}\n", TINY_META)
    with pytest.raises(TemplateError, match=r"broken/Dockerfile.j2:2: template syntax error"):
        spec("broken")


def test_sandbox_refuses_python_internals(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("escape", "FROM {{ base }}\nRUN {{ base.__class__.__mro__[1].__subclasses__() }}\n", TINY_META)
    with pytest.raises(TemplateError, match=r"escape/Dockerfile\.j2"):
        spec("escape")


def test_missing_context_file(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("noctx", "FROM {{ base }}\nCOPY data.txt /data.txt\n", TINY_META + "context: [data.txt]\n")
    with pytest.raises(ContextError, match=r"context file 'data\.txt' not found"):
        spec("noctx")


def test_copy_of_a_file_outside_the_context(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("nocopy", "FROM {{ base }}\nCOPY secret.txt /x\n", TINY_META)
    with pytest.raises(ContextError, match=r"COPY source 'secret.txt' is not in the build context"):
        spec("nocopy")


def test_unpinned_package_and_unknown_keys_are_refused(make_template, home: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("loose", "FROM {{ base }}\n", TINY_META + "packages: [torch>=2]\n")
    with pytest.raises(TemplateError, match=r"'torch>=2' is not pinned"):
        spec("loose")
    make_template("typo", "FROM {{ base }}\n", TINY_META + "pakages: []\n")
    with pytest.raises(TemplateError, match=r"unknown key\(s\) \['pakages'\]"):
        spec("typo")


def test_unknown_template_lists_the_known_ones(home: Path) -> None:
    with pytest.raises(TemplateError, match=r"'nope' not found.*known templates: .*cuda-torch"):
        templates.load("nope")


def test_no_engine_reachable_names_it_and_how_to_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    with pytest.raises(EngineUnavailable) as err:
        find_endpoint()
    message = str(err.value)
    assert f"unix://{tmp_path}/none.sock" in message and "dockerd" in message
    assert "podman system service" in message and "\n" not in message
    assert err.value.exit_code == 2


def test_apt_mirror_from_deb822_and_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\n")
    assert apt_mirror(tmp_path) == "http://mirror.invalid/debian"
    other = tmp_path / "other"
    other.mkdir()
    (other / "sources.list").write_text("# c\ndeb [arch=amd64] http://m.invalid/debian bookworm main\n")
    assert apt_mirror(other) == "http://m.invalid/debian"
    with pytest.raises(ImageUnavailable, match="no Debian mirror found"):
        apt_mirror(tmp_path / "empty")


def test_real_apt_config_has_a_mirror() -> None:
    assert "://" in apt_mirror()


@pytest.mark.parametrize(("options", "message"), [
    ({"memory": "lots"}, "memory='lots': use a size"),
    ({"cpus": "-1"}, "cpus='-1': must be > 0"),
    ({"network": "maybe"}, "network='maybe': use true or false"),
    ({"swap": "1g"}, r"unknown option\(s\) \['swap'\]"),
])
def test_bad_run_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        runopts.merge(templates.RunDefaults(), options, needs_gpu=False, needs_network=False)


def test_device_requests_for_gpus() -> None:
    base = {"image": "x", "command": ("true",), "user": "1000:1000", "mounts": (), "environment": {}}
    assert runopts.RunOptions(**base).device_requests() == []
    assert "device_requests" not in runopts.RunOptions(**base).sdk_kwargs()
    every = runopts.RunOptions(**base, gpus="all").device_requests()[0]
    assert every["Count"] == -1 and every["Capabilities"] == [["gpu"]]
    assert runopts.RunOptions(**base, gpus="2").device_requests()[0]["Count"] == 2
    assert runopts.RunOptions(**base, gpus="0,3").device_requests()[0]["DeviceIDs"] == ["0", "3"]


# -- a real plan with h100/h200/a100 variations declaring containers ------------------------

LLAMA = """
name: llama-container-test
tags: [mlperf, inference, llama-test]
summary: variations naming the GPU container templates
variations:
  cpu: {group: device, default: true}
  h100: {group: device, requires: {accelerator: h100}, container: vllm}
  h200: {group: device, requires: {accelerator: h200}, container: vllm}
  a100: {group: device, requires: {accelerator: a100}, container: cuda-torch}
steps:
  - uses: shell
    with: {cmd: [python3, -c, "print(1)"]}
cache: false
"""


def _gpu_plan(tmp_path: Path, accelerator: str):  # type: ignore[no-untyped-def]
    from cmx_core.api import plan

    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "llama.yaml").write_text(LLAMA)
    facts = tmp_path / f"facts-{accelerator}.json"
    facts.write_text(json.dumps({"facts": {"accelerator": [accelerator],
                                           "os": {"name": "linux"}}}))
    return plan(f"mlperf,inference,llama-test,{accelerator}", recipes_dirs=[recipes], facts_file=facts)


@pytest.mark.parametrize(("accelerator", "template", "arch"),
                         [("h100", "vllm", "9.0"), ("h200", "vllm", "9.0"), ("a100", "cuda-torch", "8.0")])
def test_gpu_variation_plans_render_image_and_run_options(tmp_path: Path, home: Path, accelerator: str,
                                                          template: str, arch: str) -> None:
    the_plan = _gpu_plan(tmp_path, accelerator)
    assert the_plan.container == template
    assert plan_accelerator(the_plan) == accelerator
    rendered = spec(template, accelerator)
    assert f'TORCH_CUDA_ARCH_LIST="{arch}"' in rendered.dockerfile
    run_dir = tmp_path / "run"
    job = DockerExecutor().prepare(execution_request(the_plan, run_dir, settings=DockerSettings()))
    image = ImageRecord(tag=rendered.tag, image_id="sha256:" + "0" * 64, digest="sha256:" + "0" * 64,
                        template=template, accelerator=accelerator, base=rendered.base_ref,
                        base_id=None, base_digest=None,
                        runtime="docker 20.10", content_digest=rendered.digest, built=False, build_s=0.0)
    planned = container_plan(job, image, DockerSettings())
    kwargs = planned.options.sdk_kwargs()
    (request_,) = kwargs["device_requests"]
    assert request_.count == -1 and request_.capabilities == [["gpu"]]
    assert kwargs["network_mode"] == "none"
    assert kwargs["shm_size"] == "16g"
    assert kwargs["user"] != "0:0" and not kwargs["user"].startswith("0:")
    assert kwargs["volumes"][str(run_dir.resolve())]["bind"] == str(run_dir.resolve())
    cmd = kwargs["command"]
    assert cmd[:3] == ["cmx", "run", "--lock"] and "--allow-drift=remote" in cmd
    assert cmd[cmd.index("--lock") + 1] == str(run_dir / "remote-stage" / "lock.json")
    assert cmd[cmd.index("--executor") + 1] == "local"
    assert cmd[cmd.index("--output") + 1] == str(run_dir / "remote")


def test_cpu_variation_gets_no_gpus_and_inputs_pass_through(tmp_path: Path, home: Path) -> None:
    from cmx_core.api import plan

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "llama.yaml").write_text(LLAMA)
    the_plan = plan("mlperf,inference,llama-test", recipes_dirs=[recipes])
    assert the_plan.container is None and plan_accelerator(the_plan) is None
    request = execution_request(the_plan, tmp_path / "run", settings=DockerSettings(), use_cache=False)
    cmd = far_arguments(request, "lock.json", str(tmp_path / "out"))
    assert "--no-cache" in cmd
    assert json.loads(request.lock_path.read_text())["query"]["recipes_dirs"] == [str(recipes.resolve())]
    job = DockerExecutor().prepare(request)
    image = ImageRecord(tag="cmx-python:x", image_id="sha256:" + "0" * 64, digest="sha256:" + "0" * 64,
                        template="python", accelerator=None, base="b", base_id=None, base_digest=None,
                        runtime="docker 20.10", content_digest="d", built=False, build_s=0.0)
    mounts = {m.source: m for m in container_plan(job, image, DockerSettings()).options.mounts}
    assert mounts[str(recipes.resolve())].read_only
    merged = runopts.merge(templates.load("python").run, {}, needs_gpu=False, needs_network=False)
    assert merged["gpus"] is None and merged["network"] is False


def test_errors_are_cmx_errors_with_one_line() -> None:
    for cls in (TemplateError, ContextError, EngineUnavailable, ImageUnavailable):
        assert issubclass(cls, CmxError)


def test_cli_without_an_engine_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    """The executor itself failed: a failed run, recorded, exit 1 as the README says (2 is bad input)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CMX_HOME": str(tmp_path / "home"), "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    proc = subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=detect,os",
                           "--container"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    line, recorded = proc.stderr.strip().splitlines()  # the failure is still an error result
    assert line.startswith("cmx: error: docker executor: no container engine reachable") and "dockerd" in line
    assert recorded.startswith("cmx: the failed run was recorded in ") and recorded.endswith("result.json")
    document = json.loads(Path(recorded.rsplit(" ", 1)[1]).read_text())
    assert document["status"] == "error" and "no container engine reachable" in document["error"]["message"]


def test_a_plugin_named_twice_is_one_package_with_the_union_of_extras(home: Path) -> None:
    from cmx_docker.sources import local_packages

    packages = local_packages(("mlperf", "detect", "mlperf[llm]"), DigestMemo(None))
    assert [p.dist for p in packages] == ["cmx-core", "cmx-detect", "cmx-mlperf"]
    assert packages[2].extras == ("llm",)


def test_plugin_missing_from_the_checkout(home: Path) -> None:
    from cmx_docker.sources import local_packages

    with pytest.raises(ContextError, match=r"plugin 'nosuch' is not in the checkout .*entry points: .*detect"):
        local_packages(("nosuch",), DigestMemo(None))


@pytest.mark.parametrize(("accelerator", "arch"), [("h100", "9.0"), ("h200", "9.0"), ("a100", "8.0")])
def test_mlperf_llama_gpu_variations_plan_their_vllm_image(tmp_path: Path, home: Path, accelerator: str,
                                                           arch: str) -> None:
    pytest.importorskip("cmx_mlperf", reason="cmx-mlperf (plugins/mlperf) provides mlperf,inference,llama")
    from cmx_core.api import plan
    from cmx_core.testing.registry import get_registry
    from cmx_docker.executor import plan_plugins

    facts = tmp_path / "facts.json"
    gpus = {"devices": [{"index": 0, "accelerator_tag": accelerator, "memory_total_bytes": 85520809984}]}
    facts.write_text(json.dumps({"facts": {"accelerator": [accelerator], "gpus": gpus}}))
    the_plan = plan(f"mlperf,inference,llama,{accelerator}", facts_file=facts)
    assert the_plan.container == "vllm" and plan_accelerator(the_plan) == accelerator
    plugins = plan_plugins(the_plan, get_registry())
    assert "mlperf" in plugins and "detect" in plugins
    memo = DigestMemo(None)
    rendered = context.image_spec("vllm", None, memo, accelerator, plugins=plugins)
    assert "cmx-mlperf==0.1.0" in rendered.requirements.splitlines()
    assert "vllm==0.10.1.1" in rendered.requirements.splitlines()
    assert f'ENV TORCH_CUDA_ARCH_LIST="{arch}"' in rendered.dockerfile and "EXPOSE 8000" in rendered.dockerfile
    image = ImageRecord(tag=rendered.tag, image_id="sha256:" + "1" * 64, digest="sha256:" + "1" * 64,
                        template="vllm", accelerator=accelerator, base=rendered.base_ref, base_id=None,
                        base_digest=None, runtime="docker 20.10", content_digest=rendered.digest,
                        built=False, build_s=0.0)
    job = DockerExecutor().prepare(execution_request(the_plan, tmp_path / "run", settings=DockerSettings()))
    kwargs = container_plan(job, image, DockerSettings()).options.sdk_kwargs()
    (device,) = kwargs["device_requests"]
    assert device.count == -1 and device.capabilities == [["gpu"]]
    assert kwargs["network_mode"] == "none" and kwargs["shm_size"] == "16g"
    assert kwargs["environment"]["CMX_CONTAINER_IMAGE"] == rendered.tag


def test_network_only_when_a_step_type_declares_it(tmp_path: Path, home: Path) -> None:
    from cmx_core.api import plan
    from cmx_core.testing.registry import get_registry
    from cmx_docker.executor import plan_needs_network

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "net.yaml").write_text(
        "name: needs-net\ntags: [needs, net]\nsummary: uses a step type that needs the network\n"
        "steps:\n  - uses: docker.base\n    with: {suite: bookworm}\ncache: false\n")
    registry = get_registry()
    assert plan_needs_network(plan("needs,net", recipes_dirs=[recipes]), registry) is True
    assert plan_needs_network(plan("detect,os"), registry) is False
    merged = runopts.merge(templates.load("python").run, {}, needs_gpu=False, needs_network=True)
    assert merged["network"] is True


def test_plan_refuses_an_unknown_container_template_before_anything_runs(tmp_path: Path, home: Path) -> None:
    import os
    import subprocess
    import sys

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "boxy.yaml").write_text("name: boxy\ntags: [boxy]\nsummary: an unknown template\n"
                                       "container: nosuch\nsteps: [{uses: shell, with: {cmd: ['true']}}]\n")
    env = {**os.environ, "CMX_HOME": str(tmp_path / "h"), "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    for command in ("plan", "run"):
        proc = subprocess.run([sys.executable, "-m", "cmx_core", command, "--tags=boxy", "--recipes", str(recipes)],
                              capture_output=True, text=True, env=env, timeout=120, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "cmx: error: container template 'nosuch' not found in "
            f"[{str(templates.template_dirs()[0])!r}]; known templates: ale-bench-judge, cpu-torch, cuda-torch, "
            "python, vllm"]
    assert not (tmp_path / "h" / "data" / "runs").exists()  # refused before a run directory exists


def test_plan_shows_the_image_tag_gpus_mounts_and_network_of_a_gpu_recipe(tmp_path: Path, home: Path) -> None:
    pytest.importorskip("cmx_mlperf", reason="cmx-mlperf (plugins/mlperf) provides mlperf,inference,llama")
    from cmx_core.api import plan
    from cmx_core.testing.registry import get_registry
    from cmx_core.testing.runs import plan_view
    from cmx_docker.executor import plan_plugins

    facts = tmp_path / "facts.json"
    gpus = {"devices": [{"index": 0, "accelerator_tag": "h100", "memory_total_bytes": 85520809984}]}
    facts.write_text(json.dumps({"facts": {"accelerator": ["h100"], "gpus": gpus}}))
    query = ("mlperf,inference,llama,h100", {"model_path": "/models/llama-3.1-8b"})
    shown = plan_view(*query, facts_file=facts).to_json()
    executor = shown["executor"]
    expected = context.image_spec("vllm", None, DigestMemo(None), "h100",
                                  plugins=plan_plugins(plan(*query, facts_file=facts), get_registry())).tag
    assert executor["name"] == "docker" and executor["image"] == expected
    assert executor["gpus"] == "all" and executor["network"] == "none" and executor["shm_size"] == "16g"
    assert executor["mounts"][0] == "<run dir> (read-write)"
    (step,) = next(n for n in shown["nodes"] if n["id"] == "mlperf-inference-llama")["steps"]
    launch = step["rendered"]["sut_params"]["launch"]
    assert launch[:3] == ["vllm", "serve", "/models/llama-3.1-8b"]
    assert "{{" not in json.dumps(step["rendered"])
