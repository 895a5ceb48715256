"""A spec's ``root_fs``: the sandbox runs on another system root (an exported image's) instead
of the host's ``/usr``. A real bubblewrap run on a tiny root built here (a shell, ``cat`` and
``setpriv`` with their libraries copied from the host, a marker file): the program sees that
root's ``/usr`` and nothing of the host's, single runs and session runs alike."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cmx_core.api import SandboxSpec, UsageError
from cmx_core.sandbox import bwrap_args
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.session import BubblewrapSession, session_unavailable
from cmx_core.sandbox.spec import check_spec

PROGRAMS = ("/usr/bin/dash", "/usr/bin/cat", "/usr/bin/setpriv")


def _copy(host: str, root: Path) -> None:
    real = os.path.realpath(host)
    inside = host if host.startswith("/usr/") else "/usr" + host    # merged-usr: /lib64/x -> /usr/lib64/x
    target = root / inside.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(real, target)


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root filesystem with only a shell, cat, setpriv, their libraries and a marker."""
    if shutil.which("ldd") is None or not all(Path(p).is_file() for p in PROGRAMS):
        pytest.skip("ldd, dash, cat and setpriv are needed to build the tiny root")
    root = tmp_path_factory.mktemp("rootfs")
    for program in PROGRAMS:
        _copy(program, root)
        listing = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
        for library in re.findall(r"(/\S+) \(0x", listing):
            _copy(library, root)
    os.symlink("dash", root / "usr/bin/sh")
    for name in ("bin", "lib", "lib64"):
        if (root / "usr" / name).is_dir():
            os.symlink(f"usr/{name}", root / name)
    (root / "usr/share").mkdir(parents=True)
    (root / "usr/share/cmx-root-marker").write_text("the tiny root\n")
    (root / "etc").mkdir()
    for path in root.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o755)
    root.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def backend() -> BubblewrapSandbox:
    box = BubblewrapSandbox()
    problem = box.available()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"bubblewrap sandbox required in CI: {problem}")
        pytest.skip(problem)
    return box


SCRIPT = "cat /usr/share/cmx-root-marker; test -e /usr/bin/python3 && echo host-python || echo no-python"


def test_the_layout_binds_the_root_fs_in_place_of_the_hosts(tiny_root: Path, tmp_path: Path) -> None:
    spec = SandboxSpec(argv=["/usr/bin/sh"], work_dir=str(tmp_path), root_fs=str(tiny_root))
    args = bwrap_args._root_layout(spec.root_fs)
    assert args[:3] == ["--ro-bind", str(tiny_root / "usr"), "/usr"]
    assert args[args.index("/lib64") - 2:args.index("/lib64") + 1] == ["--symlink", "usr/lib64", "/lib64"]
    assert "/usr" not in [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"]   # nothing of the host's
    assert bwrap_args.host_path(spec, "/usr/bin/cat") == str(tiny_root / "usr/bin/cat")
    assert bwrap_args.host_path(spec, "/bin/sh") == str(tiny_root / "usr/bin/sh")
    bwrap_args.check_program(spec)
    with pytest.raises(UsageError, match="does not exist inside the sandbox"):
        bwrap_args.check_program(SandboxSpec(argv=["/usr/bin/python3"], work_dir=str(tmp_path),
                                             root_fs=str(tiny_root)))


@pytest.mark.parametrize("root_fs", ["relative/root", "/nonexistent-cmx-root"])
def test_a_root_fs_without_usr_is_one_usage_line(tmp_path: Path, root_fs: str) -> None:
    with pytest.raises(UsageError, match=r"sandbox root_fs .* is not a root filesystem") as caught:
        check_spec(SandboxSpec(argv=["/usr/bin/true"], work_dir=str(tmp_path), root_fs=root_fs))
    assert "\n" not in str(caught.value)


def test_a_single_run_sees_the_root_fs(backend: BubblewrapSandbox, tiny_root: Path, tmp_path: Path) -> None:
    host = backend.run(SandboxSpec(argv=["/usr/bin/sh", "-c", SCRIPT], work_dir=str(tmp_path)))
    assert host.stdout.decode().splitlines()[-1] == "host-python"      # the host's /usr has python3
    ran = backend.run(SandboxSpec(argv=["/usr/bin/sh", "-c", SCRIPT], work_dir=str(tmp_path),
                                  root_fs=str(tiny_root)))
    assert ran.verdict.value == "ok", (ran.reason, ran.stderr)
    assert ran.stdout.decode().splitlines() == ["the tiny root", "no-python"]


def test_a_session_runs_on_its_root_fs_and_refuses_another(tiny_root: Path, tmp_path: Path) -> None:
    why = session_unavailable()
    if why:
        pytest.skip(why)
    if not Path("/usr/bin/python3").exists():
        pytest.skip("the session's runner is python3")
    # the session's runner is the root's python3: this root lends the host's /usr (a link the
    # bind follows) and has an /etc of its own, whose nsswitch.conf the session must show
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    os.symlink("/usr", root / "usr")
    for name in ("bin", "lib", "lib64"):
        if Path(f"/usr/{name}").is_dir():
            os.symlink(f"usr/{name}", root / name)
    (root / "etc/nsswitch.conf").write_text("# the session root\n")
    root.chmod(0o755)
    (root / "etc").chmod(0o755)
    (root / "etc/nsswitch.conf").chmod(0o644)
    (tmp_path / "work").mkdir()
    with BubblewrapSession(tmp_path / "work", root_fs=str(root)) as session:
        (tmp_path / "work" / "a").mkdir()
        ran = session.run(SandboxSpec(argv=["/usr/bin/cat", "/etc/nsswitch.conf"],
                                      work_dir=str(tmp_path / "work" / "a"), root_fs=str(root)))
        assert ran.stdout == b"# the session root\n", (ran.reason, ran.stderr)
        with pytest.raises(UsageError, match="is not this session's"):
            session.run(SandboxSpec(argv=["/usr/bin/true"], work_dir=str(tmp_path / "work" / "a")))
