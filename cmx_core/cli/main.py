"""The ``cmx`` command: argument parsing and printing only; the logic is in the Python API.

Exit codes: 0 success, 1 a run failed, 2 bad usage or bad input, 130 interrupted. Every
error is one line on stderr; ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import os
import sys

from cmx_core import __version__, paths
from cmx_core.cli.handover_memo import invocation, may_have, remember, remembered
from cmx_core.errors import CmxError, HandOver, UsageError, escape_controls
from cmx_core.plugins.command_index import read_help, terminal_width, write_help

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


_PARSER_NAMES = {"Parser", "common_options", "build_parser", "COMMAND_MODULES"}


def __getattr__(name: str) -> Any:
    """The parser lives in :mod:`cmx_core.cli.parser`; importing it costs argparse, which a
    replayed warm run never needs."""
    if name in _PARSER_NAMES:
        from cmx_core.cli import parser  # deferred: start-up: pulls filelock, pluggy (179 modules)

        return getattr(parser, name)
    raise AttributeError(name)


TOP_HELP = (["--help"], ["-h"])
"""The top-level help, printed from its cached text when it is current."""


GLOBAL_FLAGS = frozenset({"-v", "--verbose", "-q", "--quiet", "-s", "--json", "--strict", "--strict-plugins",
                          "--wide"})
"""Options every command takes; given before the command (``cmx -v run ...``) they move after it."""


def hoist_globals(args: list[str]) -> list[str]:
    """``cmx -v run --tags=x`` as ``cmx run -v --tags=x``: leading global flags go after the
    command word, where its parser (which owns them) reads them."""
    lead = 0
    while lead < len(args) and args[lead] in GLOBAL_FLAGS:
        lead += 1
    if lead == 0 or lead == len(args):
        return args
    return [args[lead], *args[:lead], *args[lead + 1:]]


def main(argv: Sequence[str] | None = None) -> int:
    args_list = hoist_globals(list(sys.argv[1:] if argv is None else argv))
    if "--version" in args_list and "--json" in args_list:
        import json  # deferred: not needed by cmx --help or a replayed warm run

        print(json.dumps({"name": "cmx", "version": __version__}))
        return 0
    if args_list in TOP_HELP:
        text = read_help(terminal_width())
        if text is not None:  # argparse, the plugins and their summaries are not needed
            sys.stdout.write(text)
            return 0
    import signal  # deferred: not needed by cmx --help or a replayed warm run

    previous = signal.signal(signal.SIGTERM, _terminate)  # a CI cancel cleans up like Ctrl-C
    previous_hup = signal.signal(signal.SIGHUP, _terminate)  # so does a closed terminal

    options_env = {name: os.environ.get(name) for name in OPTION_ENV}
    typed, memo_key, first = list(args_list), None, True
    try:
        if may_have(args_list):
            memo_key = invocation(args_list)  # before a command changes the environment
            handed = None if memo_key is None else remembered(args_list, memo_key)
            args_list, first = (args_list, True) if handed is None else (hoist_globals(handed), False)
        while True:
            try:
                return _replay_or_dispatch(args_list)
            except HandOver as hand:
                if hand.depends_on is not None and first and _options_unset(options_env):
                    memo_key = memo_key or invocation(typed)
                    if memo_key is not None:
                        remember(typed, memo_key, hand.argv, hand.depends_on)
                args_list, first = hoist_globals(hand.argv), False
    except CmxError as exc:
        _print_error(exc, args_list)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (`cmx list recipes | head -1`): end quietly, as ls does
        _silence_stdout()
        return CLOSED_PIPE_EXIT
    except OSError as exc:
        if exc.filename is None:
            raise
        _print_error(CmxError(_os_error_line(exc)), args_list)
        return 2
    except KeyboardInterrupt:
        print("cmx: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, previous_hup)
        _restore_env(options_env)


def _replay_or_dispatch(args_list: list[str]) -> int:
    replay_key = None
    if args_list[:1] == ["run"]:
        # deferred: start-up: 26 modules not needed to start cmx
        from cmx_core.run.replay import invocation_key, try_replay

        replay_key = invocation_key(args_list)  # before _dispatch changes the environment
        code = try_replay(args_list, replay_key)
        if code is not None:
            return code
    return _dispatch(args_list, replay_key)


CLOSED_PIPE_EXIT = 141
"""The exit status when stdout's reader closed the pipe: what a shell reports for a command
that SIGPIPE ended (128 + 13), as for ``ls | head -1``."""


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not fail again on
    the closed pipe (and print "Exception ignored ..." after the quiet exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (an in-process caller's buffer)
        pass


def run_command() -> int:
    """The ``cmx`` command as a process (``scripts/cmx``, ``python -m cmx_core``): :func:`main`,
    then what a step left behind that no cgroup held is killed (the subreaper fallback:
    :func:`cmx_core.run.processes.reap_adopted`)."""
    try:
        return main()
    finally:
        processes = sys.modules.get("cmx_core.run.processes")  # loaded only if a step ran
        if processes is not None:
            processes.reap_adopted()


OPTION_ENV = ("CMX_STRICT_PLUGINS", "CMX_STRICT", "CMX_DISABLE_PLUGINS")
"""Variables ``--strict``, ``--strict-plugins`` and ``--disable-plugin`` set for the command
(and the processes it starts); restored when an in-process ``main()`` returns."""


def _options_unset(before: dict[str, str | None]) -> bool:
    """Whether the command left the option variables as they were (a memo's key is read before)."""
    return all(os.environ.get(name) == value for name, value in before.items())


def _restore_env(before: dict[str, str | None]) -> None:
    """Undo what the options set, so a later in-process call (a test, an API user) starts clean;
    a changed plugin selection also forgets the loaded registry."""
    changed = False
    for name, value in before.items():
        if os.environ.get(name) == value:
            continue
        changed = changed or name == "CMX_DISABLE_PLUGINS"
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if changed:
        from cmx_core.plugins.loader import reset_registry  # deferred: start-up: pulls filelock, pluggy (176 modules)

        reset_registry()


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _disable_plugins(args_list: list[str]) -> None:
    """``--disable-plugin NAME`` (or ``=NAME``, repeatable) acts before any plugin loads, as
    pytest's ``-p no:NAME`` does: the parser that reads it is itself built from the plugins."""
    names = [a.split("=", 1)[1] for a in args_list if a.startswith("--disable-plugin=")]
    names += [args_list[i + 1] for i, a in enumerate(args_list[:-1]) if a == "--disable-plugin"]
    if names:
        from cmx_core.plugins.loader import disable_plugins  # deferred: start-up: pulls filelock, pluggy (176 modules)

        disable_plugins(names)


def _dispatch(args_list: list[str], replay_key: str | None = None) -> int:
    if "--strict-plugins" in args_list or "--strict" in args_list:
        os.environ["CMX_STRICT_PLUGINS"] = "1"
        if "--strict" in args_list:
            os.environ["CMX_STRICT"] = "1"
    _disable_plugins(args_list)
    from cmx_core.cli.parser import build_parser  # deferred: start-up: pulls filelock, pluggy (179 modules)

    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(command)
    if args_list in TOP_HELP:
        text = parser.format_help()
        write_help(terminal_width(), text)
        sys.stdout.write(text)
        return 0
    args, extra = parser.parse_known_args(args_list)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if extra and not getattr(args, "accepts_inputs", False):
        raise UsageError(f"cmx {args.command}: unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    args.argv = args_list
    args.replay_key = replay_key
    handler = getattr(args, "handler", None)
    if handler is None:
        raise UsageError(f"cmx {args.command}: missing subcommand (see 'cmx {args.command} --help')")
    return int(handler(args) or 0)


def _os_error_line(exc: OSError) -> str:
    """A file-system failure nothing below caught (a state directory that is a file or
    read-only, say) as one line naming the path."""
    where = str(exc.filename)
    line = f"{where}: {exc.strerror or exc}"
    roots = (paths.cache_root(), paths.data_root())
    if any(where == root or where.startswith(root.rstrip("/") + "/") for root in roots):
        line += ("; cmx keeps its state there (CMX_HOME, CMX_CACHE_DIR, CMX_DATA_DIR): "
                 "make it a writable directory")
    return line


def error_line(message: str) -> str:
    """The stderr line of an error, with one ``cmx: error:`` prefix: a message that names its
    command (``cmx plan: ...``) reads ``cmx: error: plan: ...``, and a ``cmx: error:`` carried
    in from another cmx process (a sweep point, a far side) is dropped, never doubled."""
    import re  # deferred: only an error needs it

    message = re.sub(r"(^|: )cmx: error: ", r"\1", message)
    while message.startswith("cmx: "):
        message = message[len("cmx: "):]
    named = re.match(r"cmx ((?:[a-z][\w-]*)(?: [a-z][\w-]*)*): ", message)
    if named:
        message = f"{named.group(1)}: {message[named.end():]}"
    return f"cmx: error: {message}"


def _print_error(exc: CmxError, args_list: list[str]) -> None:
    message = " ".join(escape_controls(str(exc).split("\n")[0]).split())
    result_path = getattr(exc, "result_path", None)
    if "--json" in args_list:
        import json  # deferred: not needed by cmx --help or a replayed warm run

        doc = {"error": message, "exit_code": exc.exit_code}
        if result_path is not None:
            doc["result_path"] = str(result_path)
        print(json.dumps(doc))
    print(error_line(message), file=sys.stderr)
    if result_path is not None:
        print(f"cmx: the failed run was recorded in {result_path}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
