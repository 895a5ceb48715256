"""What needs no engine: the secret scan, the .dockerignore, owners and the reaper's rule,
ownership hand-back, CDI mapping, the template a plan needs, the rootfs digest."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_docker import gpus, owner, ownership
from cmx_docker.base import rootfs_digest
from cmx_docker.build import dockerignore
from cmx_docker.errors import ContextError
from cmx_docker.scan import scan_context

KEY_BLOCK = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow\n-----END " + "RSA PRIVATE KEY-----\n"


def _ctx(tmp_path: Path, files: dict[str, str]) -> Path:
    ctx = tmp_path / "ctx"
    for rel, text in files.items():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(text)
    return ctx


def test_a_context_holding_an_exported_secret_is_refused_naming_the_file(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"Dockerfile": "FROM x\n", "conf/app.ini": "token = hf_abcdefghijklmnop\n"})
    with pytest.raises(ContextError) as err:
        scan_context(ctx, environ={"HF_TOKEN": "hf_abcdefghijklmnop", "PATH": "/usr/bin"})
    message = str(err.value)
    assert "conf/app.ini" in message and "$HF_TOKEN" in message and "nothing was built" in message
    assert "hf_abcdefghijklmnop" not in message and "\n" not in message
    scan_context(ctx, environ={"PATH": "/usr/bin"})  # without the variable the file is fine


def test_a_private_key_inside_a_checkout_wheel_is_refused_but_third_party_wheels_are_not_opened(
        tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"Dockerfile": "FROM x\n"})
    (ctx / "wheels").mkdir()
    ours, theirs = ctx / "wheels" / "cmx_core-0.1.0-py3-none-any.whl", ctx / "wheels" / "big-1.0-py3-none-any.whl"
    for wheel in (ours, theirs):
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("pkg/__init__.py", "x = 1\n")
            archive.writestr("pkg/tests/key.pem", KEY_BLOCK)
    scan_context(ctx, wheels=[], skip=[ours, theirs], environ={})
    with pytest.raises(ContextError, match=r"wheels/cmx_core-0\.1\.0-py3-none-any\.whl \(member pkg/tests/key\.pem\) "
                                           r"holds a private key block"):
        scan_context(ctx, wheels=[ours], skip=[theirs], environ={})


def test_a_private_keys_begin_line_alone_is_refused_and_found_in_one_pass(tmp_path: Path) -> None:
    """The scan looks for a key's BEGIN line (the whole-block expression it used took time
    quadratic in BEGIN lines with no END, #54): one unended, among 20,000 others, is refused."""
    begin = "-----BEGIN " + "PRIVATE KEY-----\n"
    ctx = _ctx(tmp_path, {"Dockerfile": "FROM x\n", "notes.txt": "log line\n" + begin * 20_000})
    with pytest.raises(ContextError, match=r"notes\.txt holds a private key block"):
        scan_context(ctx, environ={})


def test_a_credentials_file_is_refused_by_its_name(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"Dockerfile": "FROM x\n", "files/.netrc": "machine x login y\n"})
    with pytest.raises(ContextError, match=r"files/\.netrc holds a file named '\.netrc'"):
        scan_context(ctx, environ={})


def test_dockerignore_admits_only_the_declared_files() -> None:
    text = dockerignore(["data.txt", "certs/ca-bundle.crt"])
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["*", "!Dockerfile", "!requirements.lock", "!wheels/*.whl", "!certs/ca-bundle.crt", "!data.txt"]


def test_owner_labels_name_this_process_and_a_dead_or_reused_pid_is_gone() -> None:
    labels = owner.owner_labels()
    assert labels[owner.PID] == str(os.getpid()) and not owner.owner_gone(labels)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert owner.owner_gone(owner.owner_labels(child.pid) | {owner.START: "1"})  # no such process now
    assert owner.owner_gone({**labels, owner.START: str(int(labels[owner.START]) + 1)})  # the PID was reused
    assert owner.owner_gone({**labels, owner.BOOT: "another-boot"})  # a reboot
    assert not owner.owner_gone({**labels, owner.HOST: "another-host", owner.BOOT: "x"})  # never others'


def test_a_root_run_directory_is_handed_back_to_root_or_to_sudos_caller(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        assert ownership.hand_back(tmp_path) == 0  # nothing to do for a non-root user
        return
    run = tmp_path / "run"
    (run / "remote").mkdir(parents=True)
    (run / "remote" / "result.json").write_text("{}")
    os.symlink("/etc/passwd", run / "link")
    for path in (run, run / "remote", run / "remote" / "result.json"):
        os.chown(path, 1000, 1000)
    monkeypatch.delenv("SUDO_UID", raising=False)
    assert ownership.invoking_user() == (0, 0)
    assert ownership.hand_back(run) == 3
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in [run, *run.rglob("*")]} == {(0, 0)}
    monkeypatch.setenv("SUDO_UID", "4242")
    monkeypatch.setenv("SUDO_GID", "4343")
    ownership.hand_back(run)
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in [run, *run.rglob("*")]} == {(4242, 4343)}
    assert Path("/etc/passwd").stat().st_uid == 0  # the link was changed, not its target


def test_cdi_devices_map_gpu_requests_from_a_spec_file(tmp_path: Path) -> None:
    assert gpus.cdi_devices("all", [tmp_path]) is None
    (tmp_path / "nvidia.json").write_text(json.dumps({
        "cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": "0"}, {"name": "1"}, {"name": "all"}]}))
    (tmp_path / "other.yaml").write_text("cdiVersion: 0.5.0\nkind: vendor.com/fpga\ndevices: [{name: '0'}]\n")
    assert gpus.cdi_devices("all", [tmp_path]) == ("nvidia.com/gpu=all",)
    assert gpus.cdi_devices("1", [tmp_path]) == ("nvidia.com/gpu=0",)
    assert gpus.cdi_devices("0,1", [tmp_path]) == ("nvidia.com/gpu=0", "nvidia.com/gpu=1")
    with pytest.raises(UsageError, match=r"no CDI device nvidia.com/gpu=7"):
        gpus.cdi_devices("7,0", [tmp_path])
    with pytest.raises(UsageError, match=r"lists 2 numbered GPU"):
        gpus.cdi_devices("3", [tmp_path])


def test_cdi_devices_replace_device_requests_in_the_run_options() -> None:
    from cmx_docker.runopts import RunOptions

    opts = RunOptions(image="x", command=("true",), user="1:1", mounts=(), environment={}, gpus="all",
                      cdi_devices=("nvidia.com/gpu=all",))
    kwargs = opts.sdk_kwargs()
    assert kwargs["devices"] == ["nvidia.com/gpu=all"] and "device_requests" not in kwargs


def test_the_llm_main_job_gets_cpu_torch_and_plain_recipes_get_python(home: Path) -> None:
    from cmx_core.api import plan
    from cmx_core.testing.registry import get_registry
    from cmx_docker.executor import choose_template
    from cmx_docker.settings import DockerSettings

    registry = get_registry()
    assert choose_template(plan("mlperf,inference,llama"), DockerSettings(), registry) == ("cpu-torch", None)
    assert choose_template(plan("detect,os"), DockerSettings(), registry) == ("python", None)
    assert choose_template(plan("mlperf,inference,llama"), DockerSettings(container="python"), registry)[0] == "python"


def test_build_image_builds_the_image_a_container_run_uses(home: Path) -> None:
    """The build step's plugin set and the executor's give the same content-addressed tag."""
    from cmx_core.api import plan
    from cmx_core.testing.registry import get_registry
    from cmx_docker.context import image_spec
    from cmx_docker.digests import DigestMemo
    from cmx_docker.executor import detector_plugins, plan_plugins

    registry = get_registry()
    memo = DigestMemo(None)
    for tags, template in (("mlperf,inference,llama", "cpu-torch"), ("detect,os", "python")):
        run_tag = image_spec(template, None, memo, plugins=plan_plugins(plan(tags), registry)).tag
        assert image_spec(template, None, memo, plugins=detector_plugins(registry)).tag == run_tag, tags


def _tarball(path: Path, mtime: int, order: list[str], content: bytes = b"hello\n") -> Path:
    with tarfile.open(path, "w") as archive:
        for name in order:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = mtime, 0o644
            data = content if name.endswith("a.txt") else b"other\n"
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_rootfs_digest_covers_content_and_modes_not_mtimes_or_order(tmp_path: Path) -> None:
    one = rootfs_digest(_tarball(tmp_path / "1.tar", 1000, ["./etc/a.txt", "./usr/b.txt"]))
    two = rootfs_digest(_tarball(tmp_path / "2.tar", 2000, ["./usr/b.txt", "./etc/a.txt"]))
    three = rootfs_digest(_tarball(tmp_path / "3.tar", 1000, ["./etc/a.txt", "./usr/b.txt"], b"changed\n"))
    assert one == two != three and one.startswith("sha256:")


def test_the_scan_uses_cmx_cores_token_formats(tmp_path: Path) -> None:
    """A GitHub token (a format only cmx_core.results.secrets knows) in a context file refuses the build,
    and cmx-core's secret-name rule decides which variables' values are looked for."""
    from cmx_core.api import is_secret_name

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    ctx = _ctx(tmp_path, {"Dockerfile": "FROM x\n", "notes.txt": f"push with {token}\n"})
    with pytest.raises(ContextError, match=r"notes\.txt holds a token of a known format \(ghp\.\.\.\)") as err:
        scan_context(ctx, environ={})
    assert token not in str(err.value)
    (ctx / "notes.txt").write_text("session=cmx-session-value-123\n")
    assert is_secret_name("MY_SESSION")
    with pytest.raises(ContextError, match=r"holds the value of \$MY_SESSION"):
        scan_context(ctx, environ={"MY_SESSION": "cmx-session-value-123"})
