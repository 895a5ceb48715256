"""Recovery policies and checkpoints as recipes write them (docs/faults.md).

``retries: {max: N, backoff: DURATION, on: [CLASS, ...]}`` on a recipe (every step of its
node) or on one step (that step only; it wins over the recipe's). ``max`` is the number of
retries after the first attempt; ``backoff`` the wait before each retry (doubled each
time); ``on`` the fault classes that are retried (default: every retryable class).
``bad_input`` (exit code 2: the step refused its input) is never retried, so ``on`` may not
name it.

``checkpoint: true`` (or ``{keep: true}``) on a step: a directory that survives a failed
attempt and is handed to the next (``CMX_CHECKPOINT_DIR``, ``StepContext.checkpoint_dir``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.providers.recovery import BAD_INPUT, RETRYABLE, CheckpointSpec, FaultClass, RetryPolicy
from cmx_core.recipes.durations import parse_duration

POLICY_KEYS = {"max", "backoff", "on"}
CHECKPOINT_KEYS = {"keep"}
MAX_RETRIES = 100


class PolicyError(ValueError):
    """A bad ``retries:``/``checkpoint:`` value: ``key`` (None: the section) and what to write."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def parse_policy(section: Any) -> RetryPolicy:
    """A ``retries:`` mapping (or a bare count) as a :class:`RetryPolicy`; PolicyError if bad."""
    if isinstance(section, int) and not isinstance(section, bool):
        section = {"max": section}
    if not isinstance(section, Mapping):
        raise PolicyError(None, f"expected a mapping like {{max: 2, backoff: 5s, on: [oom]}}, got {section!r}")
    section = {_key(key): value for key, value in section.items()}
    unknown = sorted(str(key) for key in set(section) - POLICY_KEYS)
    if unknown:
        raise PolicyError(unknown[0], f"unknown key; use {', '.join(sorted(POLICY_KEYS))}")
    return RetryPolicy(_count(section.get("max", 1)), _backoff(section.get("backoff", 0)),
                       parse_classes(section.get("on", RETRYABLE)))


def policy_from_options(retries: str | None, retry_on: str | None, retry_backoff: str | None) -> RetryPolicy | None:
    """``--retries N [--retry-on A,B] [--retry-backoff D]`` as a policy (None: not given); a
    bad value is a one-line UsageError naming the option (exit 2). The CLI and a sweep's
    batch path (which hands the same options to every point) both read them here."""
    given = {key: value for key, value in (("max", retries), ("on", retry_on), ("backoff", retry_backoff))
             if value is not None}
    if not given:
        return None
    if "max" not in given:
        raise UsageError("--retry-on and --retry-backoff need --retries N")
    if not str(given["max"]).isdigit():
        raise UsageError(f"--retries {given['max']!r}: use a whole number of retries, e.g. --retries 2")
    try:
        return parse_policy({**given, "max": int(given["max"])})
    except PolicyError as exc:
        raise UsageError(f"--retr{'y-' + exc.key if exc.key in ('on', 'backoff') else 'ies'}: {exc.message}") from None


def _key(key: Any) -> str:
    """YAML 1.1 reads an unquoted ``on:`` as ``true`` (and the catalog's JSON index keeps
    it as ``"True"``): all mean ``on``."""
    return "on" if key is True or key in ("true", "True") else str(key)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise PolicyError("max", f"expected a whole number of retries from 0 to {MAX_RETRIES}, got {value!r}")
    return value


def _backoff(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds is None or seconds < 0:
        raise PolicyError("backoff", f"expected a duration like 0, 5s or 2m, got {value!r}")
    return seconds


def parse_classes(value: Any) -> tuple[FaultClass, ...]:
    """``on:`` (a list, or a comma string from the command line) as known retryable classes."""
    listed = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(listed, Sequence) or not listed or not all(isinstance(v, str) and v for v in listed):
        raise PolicyError("on", f"expected a list of fault classes ({', '.join(RETRYABLE)}), got {value!r}")
    for name in listed:
        if name == BAD_INPUT:
            raise PolicyError("on", "bad_input (exit code 2) is never retried: fix the input instead")
        if name not in RETRYABLE:
            raise PolicyError("on", f"unknown fault class {name!r}; use {', '.join(RETRYABLE)}")
    return tuple(dict.fromkeys(FaultClass(name) for name in listed))


def parse_checkpoint(value: Any) -> CheckpointSpec | None:
    """``checkpoint: true | false | {keep: BOOL}``; PolicyError if bad."""
    if value is False or value is None:
        return None
    if value is True:
        return CheckpointSpec()
    if isinstance(value, Mapping) and set(value) <= CHECKPOINT_KEYS and isinstance(value.get("keep", False), bool):
        return CheckpointSpec(keep=bool(value.get("keep", False)))
    raise PolicyError(None, f"expected true, false or {{keep: true}}, got {value!r}")
