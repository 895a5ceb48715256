"""Running an agent's command in the sandbox with MLE-bench's paths.

Inside the sandbox: the public split read-only at ``/home/data``; ``/home`` itself is the one
writable directory (the agent writes ``/home/submission/submission.csv`` and may use
``/home/logs``, ``/home/code``, ``/home/agent``, the last one starting as a copy of
``--agent-dir``); the answers are not mounted at all;
``validate_submission`` (``/mlebench/bin``, on ``PATH``) checks a file's format against
the public sample submission and answers only valid or invalid; the baseline agents are at
``/mlebench/baselines``. The agent's Python environment (by default the one cmx runs in)
is mounted read-only at its own path, its ``bin`` first on ``PATH``, wherever it lives: a
venv in a checkout under ``/home/<user>`` or ``/tmp`` is bound at that path inside the
sandbox's ``/home`` (the work dir) or private ``/tmp``. Only a path that collides with
MLE-bench's own (``/home/data``, ``/home/submission``, ``/home/logs``, ``/home/code``,
``/home/agent``, ``/home``, ``/mlebench``) is refused, naming which.

Every mount target sits directly in a directory that exists with mode 0755 (``/``,
``/home``, or a read-only skeleton of empty directories leading to an environment's path):
the directories bubblewrap makes on its own for a deeper target are mode 0700 as root, which
the sandbox's user could not enter. No network, a non-root
user, and the limits of :class:`AgentSettings`. The environment holds ``COMPETITION_ID`` and
``SEED`` and nothing of the caller's.

The command is an argument list (``shlex.split`` of ``--agent-cmd``); it is never given to a
shell on the host. A command of the form ``sh -c '...'`` runs a shell inside the sandbox,
confined like any other program.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.api import Limits, Sandbox, SandboxResult, SandboxSpec, UsageError, get_sandbox
from cmx_mlebench.container import ContainerSettings
from cmx_mlebench.offline import BASELINES

HOME = "/home"
DATA = "/home/data"
SUBMISSION = "/home/submission/submission.csv"
TOOLS_ROOT = "/mlebench"
TOOLS = "/mlebench/bin"
BASELINES_INSIDE = "/mlebench/baselines"
HOME_DIRS = ("submission", "logs", "code", "agent")
VALIDATOR = Path(__file__).parent / "tools" / "validate_submission.py"


def parse_agent_cmd(text: object) -> tuple[str, ...]:
    """``--agent-cmd`` split like a POSIX shell would, without running one."""
    try:
        argv = tuple(shlex.split(str(text or "")))
    except ValueError as exc:
        raise UsageError(f"--agent-cmd={text!r}: {exc}; quote it as a shell would") from None
    if not argv:
        raise UsageError("--agent-cmd is empty; give the agent's command, e.g. "
                         f"--agent-cmd='python {BASELINES_INSIDE}/baseline.py'")
    return argv


def default_agent_env() -> tuple[Path, ...]:
    """The interpreter cmx runs in (its venv and base installation), unless it lives in /usr."""
    found: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix):
        path = Path(os.path.realpath(prefix))
        if not str(path).startswith("/usr") and path not in found:
            found.append(path)
    return tuple(found)


def parse_agent_env(text: object) -> tuple[Path, ...]:
    if not text:
        return default_agent_env()
    paths = tuple(Path(p.strip()) for p in str(text).split(",") if p.strip())
    for path in paths:
        if not path.is_absolute() or not path.is_dir():
            raise UsageError(f"--agent-env: {path} is not an absolute directory; give the agent's Python "
                             "environment (a venv or prefix), comma separated")
        check_env_path(path)
    return paths


@dataclass(frozen=True)
class AgentSettings:
    argv: tuple[str, ...]
    seed: int = 0
    time_limit_s: float = 600.0
    memory_bytes: int | None = 4 << 30
    cpus: int | None = None
    processes: int = 256
    output_bytes: int = 64 << 20
    keep_bytes: int | None = Limits.keep_bytes  # the sandbox's own default
    sandbox: str = "bubblewrap"
    agent_env: tuple[Path, ...] = field(default_factory=default_agent_env)
    container: ContainerSettings | None = None
    agent_dir: Path | None = None  # the agent's own files, copied into /home/agent (writable)


@dataclass(frozen=True)
class AgentRun:
    result: SandboxResult
    submission: Path
    home: Path
    not_applied: tuple[str, ...]
    keep_bytes: int | None = None
    """The cap on what of the agent's files came back to the host (``Limits.keep_bytes``); None: none."""


def parse_agent_dir(text: object) -> Path | None:
    if not text:
        return None
    path = Path(str(text)).expanduser()
    if not path.is_dir():
        raise UsageError(f"--agent-dir={text}: not a directory; give the directory of the agent's code")
    return path.resolve()


def _layout(work: Path, agent_dir: Path | None) -> tuple[Path, Path]:
    home = submission_path(work).parent.parent
    for name in ("data", *HOME_DIRS):
        (home / name).mkdir(parents=True, exist_ok=True)
    if agent_dir is not None:
        shutil.copytree(agent_dir, home / "agent", symlinks=True, dirs_exist_ok=True)
    tools = work / "tools"
    (tools / "bin").mkdir(parents=True, exist_ok=True)
    validator = tools / "bin" / "validate_submission"
    shutil.copyfile(VALIDATOR, validator)
    validator.chmod(0o755)
    shutil.copytree(BASELINES, tools / "baselines", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in (tools, *tools.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    validator.chmod(0o755)
    return home, tools


MLEBENCH_PATHS = (HOME, DATA, *(f"{HOME}/{name}" for name in HOME_DIRS), TOOLS_ROOT)
"""The paths the sandbox's MLE-bench layout takes; an agent environment may not be any of
them, sit inside one of them (other than ``/home`` itself) or contain one."""

NOT_MOUNTABLE = ("/proc", "/dev", "/etc")
"""Top-level directories the sandbox builds itself, where nothing else can be mounted."""

MADE_BY_SANDBOX = ("home", "tmp", "usr")
"""Top-level directories the sandbox's layout provides (``/home`` the work dir, ``/tmp`` a
private tmpfs, ``/usr`` read-only): an environment under them is bound at its own path
there, and needs no skeleton."""


def check_env_path(path: Path) -> None:
    """A UsageError naming the MLE-bench path that ``path`` (an agent environment) collides with."""
    text = os.path.normpath(str(path))
    for taken in MLEBENCH_PATHS:
        inside = text.startswith(taken + "/") and taken != HOME
        if text == taken or inside or taken.startswith(text.rstrip("/") + "/"):
            raise UsageError(f"--agent-env: {text} collides with MLE-bench's {taken} in the sandbox; give an "
                             f"environment at another path (MLE-bench takes {', '.join(MLEBENCH_PATHS)})")
    for top in NOT_MOUNTABLE:
        if text == "/" or text == top or text.startswith(top + "/"):
            raise UsageError(f"--agent-env: {text} cannot be mounted in the sandbox (the sandbox builds {top} "
                             "itself); give the agent's environment at another path")


def _skeletons(env_paths: tuple[Path, ...], work: Path) -> dict[str, str]:
    """Read-only trees of empty 0755 directories leading to each environment path outside the
    directories the sandbox provides (see above)."""
    binds: dict[str, str] = {}
    for path in env_paths:
        check_env_path(path)
        parts = path.parts[1:]
        if len(parts) == 1 or parts[0] in MADE_BY_SANDBOX:
            continue
        skeleton = work / "skeleton" / parts[0]
        inner = skeleton.joinpath(*parts[1:])
        inner.mkdir(parents=True, exist_ok=True)
        for folder in (skeleton, *inner.relative_to(skeleton).parents, inner.relative_to(skeleton)):
            (skeleton / folder).chmod(0o755)
        binds[str(skeleton)] = f"/{parts[0]}"
    return binds


def build_spec(settings: AgentSettings, competition: str, public: Path, work: Path) -> tuple[SandboxSpec, list[str]]:
    home, tools = _layout(work, settings.agent_dir)
    binds = {str(public): DATA, str(tools): TOOLS_ROOT, **_skeletons(settings.agent_env, work)}
    binds.update({str(p): str(p) for p in settings.agent_env})
    path = ":".join([TOOLS, *(f"{p}/bin" for p in settings.agent_env), "/usr/local/bin:/usr/bin:/bin"])
    env = {"COMPETITION_ID": competition, "SEED": str(settings.seed), "PATH": path, "HOME": HOME}
    limits = Limits(wall_s=settings.time_limit_s, memory_bytes=settings.memory_bytes, processes=settings.processes,
                    output_bytes=settings.output_bytes, cpus=settings.cpus, keep_bytes=settings.keep_bytes)
    extra: dict[str, object] = {}
    not_applied: list[str] = []
    if settings.container is not None:
        extra, not_applied = settings.container.spec_fields(SandboxSpec)
    spec = SandboxSpec(argv=list(settings.argv), work_dir=str(home), work_path=HOME, ro_binds=binds, env=env,
                       limits=limits, **extra)  # type: ignore[arg-type]
    return spec, not_applied


def check_sandbox(settings: AgentSettings) -> Sandbox:
    """The settings' sandbox backend, or a one-line UsageError that says why it cannot run here
    (bubblewrap missing, user namespaces restricted...) and what to install or set."""
    sandbox = get_sandbox(settings.sandbox)
    why = sandbox.available()
    if why is not None:
        raise UsageError(f"sandbox '{settings.sandbox}' cannot run here: {why}")
    return sandbox


def run_agent(settings: AgentSettings, competition: str, public: Path, work: Path) -> AgentRun:
    """Run the agent once; what it did is in the result's verdict, never an exception."""
    sandbox = check_sandbox(settings)
    spec, not_applied = build_spec(settings, competition, public, work)
    result = sandbox.run(spec)
    (work / "agent.stdout").write_bytes(result.stdout)
    (work / "agent.stderr").write_bytes(result.stderr)
    keep = spec.limits.keep_bytes if "work_bytes" in result.enforced_by else None  # no cap without the tmpfs
    return AgentRun(result, submission_path(work), Path(spec.work_dir), tuple(not_applied), keep)


def submission_path(work: Path) -> Path:
    """Where the agent's submission lands (its home's ``submission/submission.csv``)."""
    return work / "home" / "submission" / "submission.csv"
