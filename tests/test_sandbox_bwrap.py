"""The bubblewrap sandbox for real, and its escape corpus.

Each escape attempt is a small real program run in the real sandbox; each test checks the
verdict and then the host itself (the file that must not exist, the process that must not
be alive). Every run has a wall limit of a few seconds; the only timing asserted is that a
time-limit verdict arrives within the limit plus a generous slack.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from cmx_core.api import Limits, SandboxResult, SandboxSpec, UsageError, Verdict
from cmx_core.sandbox import bwrap_args
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.session import BubblewrapSession, session_unavailable
from cmx_core.testing import processes_with

SLACK_S = 5.0
"""How late past its limit a time-limit verdict may arrive (a loaded 2-core machine)."""

PY = "/usr/bin/python3"


def _install_bwrap() -> str | None:
    if shutil.which("bwrap"):
        return None
    if os.geteuid() != 0:
        return "bwrap is not installed and this user cannot apt-get install bubblewrap"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "bubblewrap"]
    for cmd in (install, ["apt-get", "update", "-qq"], install):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
        if proc.returncode == 0 and shutil.which("bwrap"):
            return None
    return f"apt-get install bubblewrap failed: {proc.stderr.strip().splitlines()[-1:]}"


@pytest.fixture(scope="module")
def backend() -> BubblewrapSandbox:
    """The real backend; installed when root, else a clear skip (a failure in CI)."""
    box = BubblewrapSandbox()
    problem = _install_bwrap() or box.available()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"bubblewrap sandbox required in CI: {problem}")
        pytest.skip(problem)
    if not Path(PY).exists():
        pytest.skip(f"{PY} is needed inside the sandbox (it sees only /usr)")
    return box


class InSession:
    """The same runs through a sandbox session (one bwrap for many runs): a session rooted at
    the spec's work dir (mounted at /work, as a single run mounts it) with the spec's inputs,
    reopened when a spec asks for another work dir or other inputs."""

    name = "bubblewrap"

    def __init__(self) -> None:
        self.session: BubblewrapSession | None = None
        self.key: tuple[str, tuple[tuple[str, str], ...]] | None = None
        self.runs = 0

    def run(self, spec: SandboxSpec) -> SandboxResult:
        key = (os.fspath(spec.work_dir), tuple(sorted(dict(spec.ro_binds).items())))
        if self.session is None or key != self.key:
            self.close()
            self.session, self.key = BubblewrapSession(spec.work_dir, dict(spec.ro_binds)), key
        self.runs += 1
        result = self.session.run(spec)
        assert "runner=session" in result.enforced
        return result

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


Box = BubblewrapSandbox | InSession


@pytest.fixture(params=["single", "session"])
def sandbox(request: pytest.FixtureRequest, backend: BubblewrapSandbox) -> Iterator[Box]:
    """Each test twice: a sandbox per run, and the runs in a session (root only: it needs cgroups)."""
    if request.param == "single":
        yield backend
        return
    why = session_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"sandbox sessions required in CI: {why}")
        pytest.skip(why)
    box = InSession()
    try:
        yield box
    finally:
        box.close()


@dataclass
class Site:
    """A run's host directories: the work dir, the public inputs, the private answers, a secret."""

    root: Path
    work: Path
    public: Path
    answers: Path
    secret: Path
    token: str

    def spec(self, argv: list[str], **limits: float) -> SandboxSpec:
        bounds = {"wall_s": 10.0, **limits}
        return SandboxSpec(argv=argv, work_dir=self.work, ro_binds={str(self.public): "/data"},
                           limits=Limits(**bounds))  # type: ignore[arg-type]


@pytest.fixture
def site(tmp_path: Path) -> Site:
    token = uuid.uuid4().hex[:12]
    work, public, private = tmp_path / "work", tmp_path / "data" / "public", tmp_path / "data" / "private"
    for folder in (work, public, private):
        folder.mkdir(parents=True)
    (public / "train.csv").write_text("id,x\n1,2\n")
    answers = private / "answers.csv"
    answers.write_text(f"id,y\n1,ANSWER-{token}\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(f"SECRET-{token}\n")
    return Site(tmp_path, work, public, answers, secret, token)


def _out(result: SandboxResult) -> str:
    return result.text() + result.text("stderr")


# -- what a normal run gets ---------------------------------------------------------------------


def test_an_ok_run_reports_its_resources(sandbox: Box, site: Site) -> None:
    code = "x = bytearray(64 << 20); x[::4096] = b'y' * (16 << 10); print(sum(range(10**7)))"
    result = sandbox.run(site.spec([PY, "-c", code]))
    assert result.verdict is Verdict.OK, result
    assert (result.exit_code, result.signal, result.stdout) == (0, None, b"49999995000000\n")
    assert result.wall_s > 0 and not result.truncated and result.backend == "bubblewrap"
    assert result.cpu_s is not None and result.cpu_s >= 0.05  # the program's own time, not only bwrap's
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 64 << 20  # the touched 64 MiB
    if os.geteuid() != 0:  # no cgroups: the RSS watchdog, and the peak and CPU time from wait4's rusage
        assert {"memory=watchdog-rss", "processes=rlimit-nproc", "file_size=rlimit"} <= set(result.enforced)
        return
    assert {"memory=cgroup", "processes=cgroup", "file_size=rlimit"} <= set(result.enforced)


def test_inputs_at_their_own_paths_inside_the_private_tmp_and_the_work_dir(sandbox: Box, site: Site) -> None:
    """An input bound deep inside the sandbox's tmpfs /tmp or inside the work dir's mount (a
    venv of a checkout under /tmp or /home, bound at its own path): the directories leading
    to it are made 0755, so the non-root user reaches it and reads it, and cannot write it."""
    spec = replace(site.spec(["sh", "-c", "cat /tmp/ci/x/.venv/train.csv /work/u/cmx/.venv/train.csv; "
                                          "stat -c %a /tmp/ci /work/u; touch /tmp/ci/x/.venv/new || echo ro"]),
                   ro_binds={str(site.public): "/tmp/ci/x/.venv", str(site.public) + "/": "/work/u/cmx/.venv"})
    result = sandbox.run(spec)
    assert result.ok, _out(result)
    assert result.text().splitlines() == ["id,x", "1,2", "id,x", "1,2", "755", "755", "ro"]


def test_the_program_runs_as_a_non_root_user(sandbox: Box, site: Site) -> None:
    keys = "^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):"
    result = sandbox.run(site.spec(["sh", "-c", f"id -u; id -g; grep -E '{keys}' /proc/self/status"]))
    uid, gid, *fields = result.text().splitlines()
    assert result.ok and uid != "0" and gid != "0", result
    status = dict(line.split(":\t") for line in fields)
    # no capability held, none an exec could grant (empty bounding set), no setuid gain
    assert status == {"CapPrm": "0000000000000000", "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
                      "CapAmb": "0000000000000000", "NoNewPrivs": "1"}, status
    if os.geteuid() == 0:
        assert (uid, gid) == ("65534", "65534")


def test_the_environment_has_nothing_of_the_hosts(sandbox: Box, site: Site,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_TEST_SECRET", f"leak-{site.token}")
    result = sandbox.run(site.spec(["env"]))
    env = dict(line.split("=", 1) for line in result.text().splitlines())
    assert result.ok, result
    assert "CMX_TEST_SECRET" not in env and site.token not in result.text()
    assert env["HOME"] == "/work" and env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert not set(env) - {"HOME", "PATH", "TMPDIR", "LANG", "PWD"}, env


def test_the_inputs_are_readable_and_the_work_dir_writable(sandbox: Box, site: Site) -> None:
    result = sandbox.run(site.spec(["sh", "-c", "cat /data/train.csv > copy.csv && pwd"]))
    assert result.ok and result.text() == "/work\n", result
    assert (site.work / "copy.csv").read_text() == "id,x\n1,2\n"


@pytest.mark.parametrize("argv", [["./no-such-solution"], ["no-such-program-cmx"], ["/root/run.sh"]])
def test_a_program_the_sandbox_cannot_see_is_a_usage_error(sandbox: Box, site: Site,
                                                           argv: list[str]) -> None:
    with pytest.raises(UsageError, match=r"sandbox argv\[0\]") as info:
        sandbox.run(site.spec(argv))
    assert "\n" not in str(info.value)


def test_a_missing_work_dir_is_a_usage_error(sandbox: Box, site: Site) -> None:
    spec = SandboxSpec(argv=["true"], work_dir=site.root / "absent")
    with pytest.raises(UsageError, match=r"work_dir .* is not an existing directory"):
        sandbox.run(spec)


def test_stdin_is_given_to_the_program(sandbox: Box, site: Site) -> None:
    spec = SandboxSpec(argv=["wc", "-c"], work_dir=site.work, stdin=b"x" * 100_000, limits=Limits(wall_s=10))
    result = sandbox.run(spec)
    assert result.ok and result.text().strip() == "100000", result


# -- the escape corpus -------------------------------------------------------------------------------


def test_writing_outside_the_work_dir_is_refused(sandbox: Box, site: Site) -> None:
    targets = [f"/etc/escape-{site.token}", f"/usr/escape-{site.token}", f"/escape-{site.token}",
               f"/data/escape-{site.token}", str(site.root / f"escape-{site.token}"),
               str(site.public / f"escape-{site.token}")]
    for target in targets:
        result = sandbox.run(site.spec(["sh", "-c", 'echo pwned > "$0"', target]))
        assert result.verdict is Verdict.ERROR and result.exit_code != 0, (target, result)
    for target in [*targets, str(site.public.parent / f"escape-{site.token}")]:
        assert not Path(target).exists(), target
    assert sorted(p.name for p in site.public.iterdir()) == ["train.csv"]


def test_the_tmp_it_writes_is_private(sandbox: Box, site: Site) -> None:
    target = f"/tmp/escape-{site.token}"
    result = sandbox.run(site.spec(["sh", "-c", 'echo pwned > "$0" && cat "$0"', target]))
    assert result.ok and result.text() == "pwned\n", result
    assert not Path(target).exists()


def test_the_private_answers_and_host_secrets_are_invisible(sandbox: Box, site: Site) -> None:
    for path in (str(site.answers), "/data/../private/answers.csv", str(site.secret), "/etc/shadow",
                 "/root/.bashrc", "/proc/1/root/etc/shadow"):
        result = sandbox.run(site.spec(["cat", path]))
        assert result.verdict is Verdict.ERROR, (path, result)
        assert site.token not in _out(result)
    listing = sandbox.run(site.spec(["ls", "/"]))
    assert set(listing.text().split()) <= {"bin", "data", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                                           "sbin", "tmp", "usr", "work"}, listing.text()


def test_no_host_path_shows_in_the_command_lines_inside(sandbox: Box, site: Site) -> None:
    """bwrap's options (every bind's host path) go through ``--args FD``: ``/proc/1/cmdline``,
    bwrap's own inside the sandbox, shows none of the run directory's or the inputs' host paths."""
    code = ("import os\nfor pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):\n"
            "    print(pid, open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())")
    result = sandbox.run(site.spec([PY, "-c", code]))
    assert result.verdict is Verdict.OK, result
    lines = result.text().splitlines()
    if "proc=hidepid" in result.enforced:  # a session: bwrap's init and the runner are hidden
        assert lines and not any(line.startswith("1 ") for line in lines), lines
        assert all("python3 -c import os" in line for line in lines if line[:1].isdigit()), lines
    else:
        assert lines[0].startswith("1 ") and "bwrap --args" in lines[0], lines
    assert str(site.root) not in result.text(), lines


def test_no_user_namespace_can_be_made_inside(sandbox: Box, site: Site) -> None:
    """As root, a seccomp filter (non-root: bwrap's --disable-userns) refuses a new user
    namespace, and so a mount namespace inside one."""
    for argv in (["unshare", "-U", "-r", "id"], ["unshare", "-U", "-m", "-r", "true"]):
        result = sandbox.run(site.spec(argv))
        assert result.verdict is Verdict.ERROR and result.exit_code == 1, (argv, result)
        # EPERM from the seccomp filter as root; ENOSPC from --disable-userns (a user namespace
        # limit of 1, its own) otherwise
        refused = "Operation not permitted" if os.geteuid() == 0 else "No space left on device"
        assert refused in result.text("stderr"), result.text("stderr")
    ran = sandbox.run(site.spec([PY, "-c", "import subprocess; print(subprocess.run(['true']).returncode)"]))
    assert ran.verdict is Verdict.OK and ran.text() == "0\n"  # clone3's ENOSYS falls back to clone
    if isinstance(sandbox, BubblewrapSandbox):
        assert ("userns=seccomp" if os.geteuid() == 0 else "userns=disabled") in ran.enforced


def test_a_socket_to_a_host_loopback_server_cannot_connect(sandbox: Box, site: Site) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'{site.token}')"
        result = sandbox.run(site.spec([PY, "-c", code]))
        assert result.verdict is Verdict.ERROR, result
        assert "Error" in result.text("stderr")
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody ever connected


def test_resolving_a_host_name_fails(sandbox: Box, site: Site) -> None:
    code = "import socket; print(socket.getaddrinfo('example.com', 443))"
    result = sandbox.run(site.spec([PY, "-c", code]))
    assert result.verdict is Verdict.ERROR and "gaierror" in result.text("stderr"), result
    interfaces = sandbox.run(site.spec(["cat", "/proc/net/dev"]))
    assert [line.split(":")[0].strip() for line in interfaces.text().splitlines()[2:]] == ["lo"]


def test_a_fork_bomb_is_capped_and_leaves_nothing_behind(sandbox: Box, site: Site) -> None:
    marker = f"bomb-{site.token}"
    code = (f"# {marker}\nimport os, time\n"
            "while True:\n"
            "    try:\n        os.fork()\n"
            "    except OSError:\n        print('refused', flush=True)\n        time.sleep(1000)\n")
    result = sandbox.run(site.spec([PY, "-c", code], wall_s=4, processes=32))
    assert result.verdict is Verdict.TIME_LIMIT, result
    assert "refused" in result.text()
    assert result.wall_s < 4 + SLACK_S
    assert processes_with(marker) == []


def test_allocating_past_the_memory_limit_is_a_memory_verdict(sandbox: Box, site: Site) -> None:
    result = sandbox.run(site.spec([PY, "-c", "x = b'x' * (512 << 20)"], memory_bytes=128 << 20))
    assert result.verdict is Verdict.MEMORY_LIMIT, result
    assert result.peak_memory_bytes is not None
    if "memory=watchdog-rss" in result.enforced:  # no cgroup: killed once the RSS it saw passed the limit
        assert result.peak_memory_bytes > 128 << 20 and "bytes resident; killed" in result.reason
    else:  # the cgroup never lets the charge pass the limit
        assert result.peak_memory_bytes <= 128 << 20


def test_running_past_the_wall_limit_is_a_time_verdict(sandbox: Box, site: Site) -> None:
    result = sandbox.run(site.spec(["sleep", "60"], wall_s=1.5))
    assert result.verdict is Verdict.TIME_LIMIT and "wall" in result.reason, result
    assert 1.5 <= result.wall_s < 1.5 + SLACK_S


def test_spinning_past_the_cpu_limit_is_a_time_verdict(sandbox: Box, site: Site) -> None:
    # a generous wall limit: on a busy machine one CPU second can take many wall seconds, and
    # the verdict under test is the CPU one
    result = sandbox.run(site.spec([PY, "-c", "while True: pass"], wall_s=180, cpu_s=1))
    assert result.verdict is Verdict.TIME_LIMIT and "CPU" in result.reason, result
    assert (result.cpu_s is None or result.cpu_s >= 0.5) and result.wall_s < 180


def test_a_daemonized_child_does_not_outlive_the_run(sandbox: Box, site: Site) -> None:
    marker = f"1000.{int(site.token[:6], 16)}"
    script = f"setsid sleep {marker} < /dev/null > /dev/null 2>&1 & (nohup sleep {marker} &) ; echo started"
    result = sandbox.run(site.spec(["sh", "-c", script]))
    assert result.ok and result.text() == "started\n", result
    assert processes_with(f"sleep {marker}") == []


def test_a_huge_file_is_stopped_at_the_size_cap(sandbox: Box, site: Site) -> None:
    cap = 1 << 20
    result = sandbox.run(site.spec(["sh", "-c", "exec head -c 50000000 /dev/zero > big"], output_bytes=cap))
    assert result.verdict is Verdict.OUTPUT_LIMIT, result
    assert (site.work / "big").stat().st_size <= cap


def test_a_huge_file_from_python_is_an_output_verdict_too(sandbox: Box, site: Site) -> None:
    """Python ignores SIGXFSZ at start-up; the seccomp filter makes that fail, so the write past
    the cap ends it with SIGXFSZ, as it ends a C program."""
    cap = 1 << 20
    code = "open('big', 'wb').write(b'x' * (8 << 20))"
    result = sandbox.run(site.spec([PY, "-c", code], output_bytes=cap))
    assert "sigxfsz=seccomp" in result.enforced, result.enforced
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.signal == signal.SIGXFSZ, result
    assert (site.work / "big").stat().st_size <= cap


CAP_AND_DELETE = """
import os, signal
try:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
except OSError as exc:
    print("refused", exc.errno, flush=True)
try:
    open("big", "wb").write(b"x" * (2 << 20))
except OSError as exc:
    print("caught", exc.errno, flush=True)
os.remove("big")
print("cleaned up", flush=True)
"""


def test_a_capped_file_deleted_at_once_is_still_an_output_verdict(sandbox: Box, site: Site) -> None:
    """#54: a file cut off at the size cap and then deleted left no trace, and the run was ``ok``.
    SIGXFSZ can be neither ignored nor caught (EINVAL), so the write past the cap ends the program."""
    result = sandbox.run(site.spec([PY, "-c", CAP_AND_DELETE], output_bytes=1 << 20))
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.signal == signal.SIGXFSZ, result
    assert result.text() == "refused 22\n", result  # never reached its clean-up


def test_flooding_stdout_is_cut_at_the_output_cap(sandbox: Box, site: Site) -> None:
    cap = 1 << 20
    result = sandbox.run(site.spec(["yes"], output_bytes=cap))
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.truncated, result
    assert len(result.stdout) + len(result.stderr) <= cap


def test_symlinks_out_of_the_work_dir_lead_nowhere(sandbox: Box, site: Site) -> None:
    (site.work / "planted").symlink_to(site.secret)
    (site.work / "planted_rel").symlink_to(Path("..") / site.secret.name)
    (site.work / "planted_answers").symlink_to(site.answers.parent)
    owner = site.secret.stat().st_uid
    made = f"ln -s /etc/shadow s1; ln -s {site.answers.parent} s2; ln -s ../data/../private s3"
    for target in ("s1", "s2/answers.csv", "s3/answers.csv", "planted", "planted_rel",
                   "planted_answers/answers.csv"):
        result = sandbox.run(site.spec(["sh", "-c", f'{made} 2>/dev/null; cat "$0"', target]))
        assert result.verdict is Verdict.ERROR, (target, result)
        assert site.token not in _out(result), target
    assert site.secret.stat().st_uid == owner  # handing the work dir over never followed a link
    assert site.secret.read_text() == f"SECRET-{site.token}\n"


@pytest.fixture
def no_leftover_groups() -> Iterator[None]:
    mine = f"cmx-sandbox-{os.getpid()}-*"  # this process's: other cmx processes on the machine make their own
    before = set(Path("/sys/fs/cgroup/memory").rglob(mine))
    yield
    assert set(Path("/sys/fs/cgroup/memory").rglob(mine)) == before


def test_the_cgroups_of_a_run_are_removed(sandbox: Box, site: Site, no_leftover_groups: None) -> None:
    assert sandbox.run(site.spec(["true"])).ok
    assert sandbox.run(site.spec(["sleep", "60"], wall_s=0.5)).verdict is Verdict.TIME_LIMIT
    if isinstance(sandbox, InSession):
        sandbox.close()  # a session's groups live as long as the session


def test_the_sandbox_user_reaches_nested_mounts_and_reads_etc_passwd(backend: BubblewrapSandbox, site: Site) -> None:
    """bwrap as root makes the directories it creates 0700, /etc included: the non-root user
    must still reach a work dir and inputs mounted deep (MLE-bench's /home/data, /home/submission)
    and read the generated /etc/passwd (so `id` names it)."""
    spec = SandboxSpec(argv=["sh", "-c", "id -un; cat /home/data/train.csv; echo ok > out.txt; pwd"],
                       work_dir=site.work, work_path="/home/submission", ro_binds={str(site.public): "/home/data"},
                       limits=Limits(wall_s=20))
    result = backend.run(spec)
    assert result.verdict is Verdict.OK, (result.reason, result.stderr)
    assert result.stdout.decode().split("\n")[:4] == ["sandbox", "id,x", "1,2", "/home/submission"]
    assert (site.work / "out.txt").read_text() == "ok\n"


def test_shm_bytes_sizes_dev_shm(backend: BubblewrapSandbox, site: Site) -> None:
    code = "import os; s = os.statvfs('/dev/shm'); print(s.f_blocks * s.f_frsize); open('/dev/shm/x', 'w')"
    result = backend.run(replace(site.spec([PY, "-c", code]), shm_bytes=32 << 20))
    assert result.verdict is Verdict.OK, result
    assert int(result.text()) == 32 << 20


def test_gpus_without_a_gpu_are_refused_with_the_fix(backend: BubblewrapSandbox, site: Site,
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bwrap_args, "DEV", tmp_path / "dev-without-gpus")
    (tmp_path / "dev-without-gpus").mkdir()
    with pytest.raises(UsageError, match=r"gpus=-1: this machine has no GPU .*docker sandbox"):
        backend.run(replace(site.spec(["true"]), gpus=-1))
    with pytest.raises(UsageError, match="gpus must be 0"):
        backend.run(replace(site.spec(["true"]), gpus=-2))


def test_gpus_pass_the_nvidia_device_nodes_through(backend: BubblewrapSandbox, site: Site,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   request: pytest.FixtureRequest) -> None:
    """Where /dev/nvidia* exist they are bound into the sandbox: all of them for -1, the first N
    cards and every control node for N; a count past the cards is refused. (Files stand in for
    the device nodes here: this machine has no GPU; the bind itself is the same. They live
    outside /tmp, which the sandbox replaces with its own.)"""
    dev = Path("/var/tmp") / f"cmx-fake-dev-{site.token}"
    dev.mkdir()
    request.addfinalizer(lambda: shutil.rmtree(dev))
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text("")
    monkeypatch.setattr(bwrap_args, "DEV", dev)
    assert bwrap_args.gpu_devices(-1) == [str(dev / n) for n in ("nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl")]
    assert bwrap_args.gpu_devices(1) == [str(dev / n) for n in ("nvidia-uvm", "nvidia0", "nvidiactl")]
    with pytest.raises(UsageError, match="has 2 GPU"):
        bwrap_args.gpu_devices(3)
    result = backend.run(replace(site.spec(["sh", "-c", f"ls {dev}"]), gpus=1))
    assert result.verdict is Verdict.OK, result
    assert result.text().split() == ["nvidia-uvm", "nvidia0", "nvidiactl"]
