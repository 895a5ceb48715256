"""The exception hierarchy of cmx.

Every error a user can cause is a :class:`CmxError`. The CLI maps it to one line on
stderr and its ``exit_code`` (2 for bad usage or bad input, 1 for a run that failed);
nothing else is caught there, so a programming error still shows its traceback.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # not at run time: every command imports this module (collections.abc costs ~1 ms)
    from collections.abc import Iterable, Sequence


class CmxError(Exception):
    """Base of every user-facing error; ``str(err)`` is the one line that is printed."""

    exit_code: int = 2


class UsageError(CmxError):
    """Bad command-line arguments or API arguments."""


class Location:
    """Where in a file something went wrong (1-based line; 0 when unknown).

    A plain class rather than a dataclass: this module is imported by every command,
    ``cmx --help`` included, and creating a dataclass costs about half a millisecond."""

    __slots__ = ("path", "line", "key")

    def __init__(self, path: str, line: int = 0, key: str = "") -> None:
        self.path = path
        self.line = line
        self.key = key

    def __repr__(self) -> str:
        return f"Location({self.path!r}, {self.line}, {self.key!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and (self.path, self.line, self.key) == (other.path, other.line, other.key)

    def __hash__(self) -> int:
        return hash((self.path, self.line, self.key))

    def __str__(self) -> str:
        text = self.path
        if self.line:
            text += f":{self.line}"
        if self.key:
            text += f": {self.key}"
        return text


class RecipeError(CmxError):
    """A recipe file that cannot be loaded or validated."""

    def __init__(self, location: Location, message: str) -> None:
        self.location = location
        self.message = message
        super().__init__(f"{location}: {message}")


class ResolveError(CmxError):
    """Tags, variations, deps or conditions that cannot be resolved into a plan."""


class PluginError(CmxError):
    """A plugin that cannot be loaded, conflicts with another, or is missing."""


class CacheError(CmxError):
    """A cache operation that cannot be carried out."""


class ResultsError(CmxError):
    """A results store or result document that cannot be read or written."""


class ProcessEnd:
    """How the process a step ran ended, as the step itself saw it: the evidence a failure's
    cause is typed by (:mod:`cmx_core.faults.causes`, docs/faults.md), never the machine's.

    ``signal``: the signal that ended it (``None``: it exited); ``oom_kills``: the OOM kills its
    own memory cgroup (``memory_group``; ``None``: it had none) counted while it ran; ``rank``:
    the training rank whose loss ended the step, and ``error`` that process's own error line.
    A plain class, like :class:`Location`; its fields are set once, when it is made."""

    __slots__ = ("signal", "oom_kills", "memory_group", "rank", "error")

    def __init__(self, *, signal: int | None = None, oom_kills: int = 0, memory_group: str | None = None,
                 rank: int | None = None, error: str = "") -> None:
        self.signal = signal
        self.oom_kills = oom_kills
        self.memory_group = memory_group
        self.rank = rank
        self.error = error

    def __repr__(self) -> str:
        return (f"ProcessEnd(signal={self.signal!r}, oom_kills={self.oom_kills}, memory_group={self.memory_group!r}, "
                f"rank={self.rank!r}, error={self.error!r})")


class StepFailed(CmxError):
    """A step that ran and failed (non-zero exit, timeout, exception). ``ended``: how its
    process ended, where the step knows (a signal, its own cgroup's OOM kills, a lost rank)."""

    exit_code = 1

    def __init__(self, message: str, *, ended: ProcessEnd | None = None) -> None:
        super().__init__(message)
        self.ended = ended


class Interrupted(CmxError):
    """The run was interrupted (Ctrl-C); nothing half-written was kept."""

    exit_code = 130


class HandOver(Exception):
    """A command hands its work to another ``cmx`` command in the same process (``cmx cm run
    script`` to ``cmx run recipe`` once it has chosen the script): the CLI runs ``argv`` as if it
    had been typed, replay and all, instead of a second interpreter start.

    ``depends_on`` (optional) names every file the choice read, when the command printed
    nothing and its choice depends on nothing else but its arguments, cmx's environment and the
    installed plugins: the CLI then remembers the hand-over, and an identical invocation goes
    straight to ``argv`` while those files are unchanged (:mod:`cmx_core.cli.handover_memo`)."""

    def __init__(self, argv: Sequence[str], depends_on: Sequence[str] | None = None) -> None:
        super().__init__(" ".join(argv))
        self.argv = list(argv)
        self.depends_on = None if depends_on is None else list(depends_on)


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """``; did you mean 'x'?`` (or ``'x' or 'y'``) for the choices close to ``word``, else ``""``.

    One helper for every "unknown name" message: tags, variations, inputs, recipe names,
    commands, plugin names and executor options (:func:`difflib.get_close_matches`, cutoff 0.6).
    """
    import difflib  # deferred: every command imports this module, a hint is only for an error

    close = difflib.get_close_matches(word, sorted(set(choices)), n=n)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


_CONTROL: dict[int, str] = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) not in "\t\n"},
    **{c: f"\\u{c:04x}" for c in (*range(0x200B, 0x2010), 0x2028, 0x2029, *range(0x202A, 0x202F),
                                   *range(0x2066, 0x206A), 0xFEFF)},
}


def escape_controls(text: str) -> str:
    """Text cmx did not write made safe for the terminal: control characters (a NUL, a
    terminal escape) shown as ``\\xNN``, and the bidi overrides (U+202A-202E, U+2066-2069),
    zero-width characters (U+200B-200F, U+FEFF) and line separators (U+2028, U+2029) that
    make a line read other than it is shown as ``\\uNNNN``. Every message, table and log
    line quoting recipe text, file names or a step's output goes through it."""
    return text.translate(_CONTROL)

