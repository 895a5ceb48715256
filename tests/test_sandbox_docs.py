"""docs/sandbox.md held to the code: the session's runner, its capabilities and markers, the
CPU counter, the spec's shm and gpus fields, the files and tests it names, the benchmark's ways."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from cmx_core.api import Limits, SandboxResult, SandboxSpec, UsageError, Verdict
from cmx_core.sandbox import bwrap_args, cgroup2, cpus, session, spec, systemd_scope

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "sandbox.md").read_text()


def test_the_runner_and_its_capabilities_are_the_codes() -> None:
    assert session.RUNNER.is_file() and f"`{session.RUNNER.relative_to(ROOT)}`" in DOC
    named = re.findall(r"`(CAP_[A-Z_]+)`", DOC.split("## Sessions", 1)[1])
    assert tuple(named) == session.RUNNER_CAPS
    assert "`/usr/bin/python3 -I -S`" in DOC and session.ROOT_AT == "/work"
    assert "`runner=session`" in DOC and "-1000" in DOC


def test_the_cpu_counter_is_named_as_in_the_code() -> None:
    assert f"`{cpus.COUNTER}`" in DOC and "os.sched_getaffinity" in DOC


def test_the_spec_fields_and_the_gpu_refusal_are_as_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fields = SandboxSpec.__dataclass_fields__
    assert fields["shm_bytes"].default is None and fields["gpus"].default == 0
    assert "`shm_bytes`" in DOC and "`gpus`" in DOC
    monkeypatch.setattr(bwrap_args, "DEV", tmp_path)
    with pytest.raises(UsageError, match="drop gpus, or run on a GPU machine"):
        bwrap_args.gpu_devices(-1)
    assert "drop `gpus` or use the docker sandbox" in DOC


def test_the_files_and_tests_it_names_exist() -> None:
    for path in re.findall(r"`((?:tests|plugins|cmx_core|benchmarks)/[\w/.-]+\.py)`", DOC):
        assert (ROOT / path).is_file(), path


def test_the_benchmark_has_the_ways_the_table_shows() -> None:
    bench = (ROOT / "benchmarks" / "bench_sandbox.py").read_text()
    for way in ("bare", "sandbox", "session", "docker"):
        assert f'"{way}"' in bench, way
    assert "| Command | bare | sandbox per run | session run | docker container |" in DOC


def test_the_no_cgroup_memory_path_is_as_documented() -> None:
    from cmx_core.sandbox import bubblewrap, watchdog

    assert f"every {bubblewrap.WATCH_TICK_S:g} s the parent sums the RSS" in DOC
    assert watchdog.PR_SET_CHILD_SUBREAPER == 36 and "`PR_SET_CHILD_SUBREAPER`" in DOC
    code = Path(bubblewrap.__file__).read_text()
    assert "RLIMIT_AS" not in code and '"memory=watchdog-rss"' in code and "`memory=watchdog-rss`" in DOC


def test_the_start_errors_are_the_codes() -> None:
    from cmx_core.sandbox import bubblewrap

    text = " ".join(DOC.split("### Where the sandbox cannot start", 1)[1].split("###", 1)[0].split())
    assert "bwrap is not installed; install the bubblewrap package (apt-get install -y bubblewrap)" in text
    for knob, (bad, _) in bubblewrap.USERNS_KNOBS.items():
        name = ".".join(Path(knob).relative_to("/proc/sys").parts)
        assert f"`{name}` = {bad}" in text, name
    code = Path(bubblewrap.__file__).read_text()
    assert "unprivileged user namespaces are restricted (" in code and "run as root or" in code
    assert '"bwrap cannot create a user namespace as this user' in " ".join(code.split())


def test_the_cgroup_v2_files_are_the_codes() -> None:

    text = DOC.split("**cgroup v2.**", 1)[1].split("\n\n", 1)[0]
    code = Path(cgroup2.__file__).read_text()
    for name in ("memory.max", "memory.swap.max", "pids.max", "cpuset.cpus", "cpu.max", "memory.peak",
                 "memory.events", "cpu.stat", "cgroup.kill", "cgroup.events", "cgroup.subtree_control"):
        assert f"`{name}`" in text and f'"{name}"' in code, name
    assert cgroup2.V2Groups.kind == "cgroup-v2" and "`memory=cgroup-v2`" in text
    assert cgroup2.PERIOD_US == 100_000 and "per\n100 ms period" in text


def test_the_unprivileged_section_is_the_tests() -> None:
    text = DOC.split("### As users run it", 1)[1].split("\n## ", 1)[0]
    test = (ROOT / "tests" / "test_sandbox_unprivileged.py").read_text()
    assert '"memory": "watchdog-rss"' in text and '{"memory": "watchdog-rss", "processes": "rlimit-nproc",' in test
    assert '"userns": "disabled", "sigxfsz": "seccomp"}' in " ".join(text.split()) and \
        '"userns": "disabled", "sigxfsz": "seccomp"}' in test
    assert "--competition=sklearn-diabetes" in text and "--competition=sklearn-diabetes" in test
    assert "range(20)" in test and 'verdict == "MEMORY_LIMIT_EXCEEDED" and memory is not None' in test
    assert "run 20 times, is judged `MEMORY_LIMIT_EXCEEDED`\neach time it gets past the limit, never AC or RE" in text
    assert "scripts/test-as-user.sh" in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / "scripts" / "test-as-user.sh").is_file()
    assert "the step containment tests" in " ".join(text.split())
    assert "tests/test_step_containment.py" in (ROOT / "scripts" / "test-as-user.sh").read_text()


def test_the_root_is_remounted_read_only_as_documented(tmp_path: Path) -> None:
    spec = SandboxSpec(argv=["true"], work_dir=tmp_path)
    args = bwrap_args.bwrap_args(spec, bwrap_args.BwrapFds(passwd=3, group=4, block=5, status=6), as_root=False,
                                 tmp_bytes=1 << 20)
    at = args.index("--remount-ro")
    assert args[at + 1] == "/" and at > args.index("--bind")  # after every mount it is built of
    assert "(`--remount-ro /`)" in DOC


def test_every_verdict_and_the_new_mechanisms_are_documented() -> None:
    for verdict in Verdict:
        assert f"| `{verdict.value}` |" in DOC, verdict
    assert f"`{cgroup2.DELEGATED_ENV}`" in DOC and "`kill=cgroup-v2`" in DOC and "`cpu_s=rlimit+cgroup-v2`" in DOC
    code = (ROOT / "cmx_core" / "sandbox" / "bubblewrap.py").read_text()
    assert '"work_bytes=tmpfs"' in code and "`work_bytes=tmpfs`" in DOC and '"kill=cgroup-v2"' in code
    assert "`memory=systemd-scope`" in DOC and "memory=systemd-scope" in systemd_scope.scope_limits(Limits())
    assert f"default {spec.WORK_BYTES >> 30} GiB" in DOC and Limits().work_bytes == spec.WORK_BYTES
    assert f"`keep_bytes` (default {spec.KEEP_BYTES >> 20} MiB" in DOC and Limits().keep_bytes == spec.KEEP_BYTES
    assert "`SandboxResult.dropped`" in DOC and "dropped" in {f.name for f in fields(SandboxResult)}
