"""Run pip for ``cmx plugins install|uninstall``: its progress on stderr, a failure in one line.

pip's own output of a failed build is a page with the build backend's traceback. cmx keeps
that page in a log file and shows pip's top-level progress lines (``Processing``,
``Successfully installed``...) as they come; on failure it raises one :class:`StepFailed`
line that names the cause it found in the output (a missing module, pip's ``ERROR:`` line)
and the log file.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from cmx_core.errors import StepFailed
from cmx_core.paths import cache_dir

_PROGRESS = ("Processing", "Obtaining", "Collecting", "Building", "Successfully", "Installing collected",
             "Looking in", "Found existing", "Uninstalling", "Attempting")
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_ERROR_LINE = re.compile(r"^ERROR: (.+)$")
_NOT_A_CAUSE = (" ", "hint:", "note:", "\u2570", "\u2502", "\u00d7")  # indented, pip's hints and box drawing
_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def log_dir() -> Path:
    path = cache_dir() / "pip-logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_pip(command: Sequence[str], shown: str) -> None:
    """Run ``command``; ``shown`` is its shell-quoted form for the error message."""
    with tempfile.NamedTemporaryFile("w", prefix="pip-", suffix=".log", dir=log_dir(), delete=False,
                                     encoding="utf-8") as log:
        log.write(f"$ {shown}\n")
        lines: list[str] = []
        with subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL) as process:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                lines.append(line.rstrip("\n"))
                if line.startswith(_PROGRESS):
                    sys.stderr.write(line)
            code = process.wait()
    if code != 0:
        raise StepFailed(f"pip exited {code}: {failure_cause(lines)}; the full output is in {log.name} "
                         f"(command: {shown})")
    Path(log.name).unlink(missing_ok=True)


def failure_cause(lines: Iterable[str]) -> str:
    """The most telling line of a failed pip run's output."""
    text = list(lines)
    for line in reversed(text):
        found = _MISSING_MODULE.search(line)
        if found:
            return (f"the build needs the Python module '{found[1]}', which is not installed in this "
                    "environment")
    raised = [m for m in (_EXCEPTION.match(line) for line in text) if m]
    if raised:
        return f"the build failed with {raised[-1][1]}: {raised[-1][2].strip()}"
    errors = [m[1] for m in (_ERROR_LINE.match(line) for line in text) if m]
    if errors:
        return errors[-1].rstrip(".")
    useful = [line.strip() for line in text if line.strip() and not line.startswith(_NOT_A_CAUSE)]
    return useful[-1] if useful else "no output"
