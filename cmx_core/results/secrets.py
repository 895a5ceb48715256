"""Secret scanning and redaction for anything cmx publishes (bundles, reports).

Two sources of secrets: the values of environment variables whose *names* say they hold a
secret (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``*_PASSWORD`` ...), and text that *looks*
like a well-known token format (``hf_...``, ``ghp_...``, ``AKIA...``, ``-----BEGIN ... PRIVATE
KEY-----``). :func:`redact` replaces both with :data:`REDACTED`; :func:`filtered_environment`
keeps only allow-listed variables and redacts the secret ones among them. Other publishers
(e.g. cmx-docker checking build args) can call these functions too.

A run redacts at write time too (:func:`redact_tree`, :func:`redact_data`, called by the
recording of a run): the values of *its own* secret-named variables and any token shape are
replaced in its logs, outputs and result before they are kept, so a bundle made later from a
shell without those variables holds none of them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cmx_core.datautil import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

REDACTED = "[REDACTED]"

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|AUTH|"
                         r"SESSION|COOKIE|_KEY$|^KEY$)", re.IGNORECASE)
"""An environment variable whose name matches holds a secret."""

TOKEN_SHAPES: tuple[re.Pattern[str], ...] = (
    re.compile(r"hf_(?<=\bhf_)[A-Za-z0-9]{20,}\b"),                        # Hugging Face
    re.compile(r"gh[pousr]_(?<=\bgh[pousr]_)[A-Za-z0-9]{20,}\b"),          # GitHub
    re.compile(r"github_pat_(?<=\bgithub_pat_)[A-Za-z0-9_]{20,}\b"),
    re.compile(r"(?:AKIA|ASIA)(?<=\b....)[0-9A-Z]{16}\b"),                  # AWS access key id
    re.compile(r"sk-(?<=\bsk-)[A-Za-z0-9_-]{20,}\b"),                       # OpenAI-style keys
    re.compile(r"xox[abprs]-(?<=\bxox[abprs]-)[A-Za-z0-9-]{10,}\b"),       # Slack
)
"""Token formats recognised in any text, whatever variable (if any) they came from. Each starts
with its literal piece and checks the word boundary before it looking back (``sk-(?<=\\bsk-)``
is ``\\bsk-``), so the expression engine jumps from one occurrence of the piece to the next
instead of trying every position: a log is scanned about 100 times faster."""
PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
PRIVATE_KEY_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
"""A private key block runs from its BEGIN line to the first END line after it
(:func:`key_blocks`). One expression for the block (BEGIN, a lazy ``[\\s\\S]*?``, END) took
time quadratic in the text where BEGIN lines have no END: 583 s for 1 MiB of them (#54)."""
TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = (*TOKEN_SHAPES, PRIVATE_KEY_BEGIN)
"""What marks a secret in text: a token format, or a private key's BEGIN line (a scanner that
refuses what holds one, such as cmx-docker's, needs no more than that)."""

TOKEN_NEEDLES: tuple[tuple[bytes, tuple[bytes, ...]], ...] = (
    (b"_", (b"hf_", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_")),
    (b"-", (b"sk-", b"xoxa-", b"xoxb-", b"xoxp-", b"xoxr-", b"xoxs-", b"PRIVATE KEY-----")),
    (b"IA", (b"AKIA", b"ASIA")),
)
"""Literal pieces at least one of which every match of :data:`TOKEN_PATTERNS` holds, grouped
under a shorter piece they share (looked for first: one pass rules out a group). Data that
holds none of them (nor a secret value) needs no regular expression, so what a run leaves
is scanned at the speed of ``bytes.find``, not of the patterns (docs/sandbox.md, host cost)."""

DEFAULT_ENV_ALLOW: tuple[str, ...] = (
    "PATH", "LANG", "LC_*", "TZ", "SHELL", "PYTHONHASHSEED", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
    "CUDA_*", "NVIDIA_*", "ROCR_*", "HIP_*", "HSA_*", "OMP_*", "MKL_*", "OPENBLAS_*", "KMP_*",
    "TORCH_*", "PYTORCH_*", "NCCL_*", "XLA_*", "TF_*", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
    "CMX_*", "SLURM_JOB_*", "SLURM_CPUS_*", "SLURM_GPUS*",
)
"""Variables a bundle keeps by default (glob patterns); everything else is dropped."""

_MIN_SECRET_LEN = 4  # shorter values ("1", "yes") would redact half of every log


@dataclass(frozen=True)
class Environment:
    """An environment filtered for publishing: ``kept`` (redacted where secret), the names
    ``dropped`` by the allow-list and the names whose value was ``redacted``."""

    kept: Mapping[str, str]
    dropped: tuple[str, ...]
    redacted: tuple[str, ...]


SETTING_NAME = re.compile(r"_(MODE|TYPE|METHOD|ENABLED|DISABLED)$", re.IGNORECASE)
"""A name that ends so names a setting about a secret, not one: ``RAY_AUTH_MODE=disabled`` (whose
value, a common word, would otherwise be redacted from every log and refused in every build)."""


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    return SECRET_NAME.search(name) is not None and SETTING_NAME.search(name) is None


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``env``'s secret-named variables, longest first (so that a secret which
    contains another is redacted whole)."""
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN}
    return tuple(sorted(values, key=len, reverse=True))


def key_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of the private key blocks in ``text``, in one pass: each from a BEGIN line to
    the first END line after it. A BEGIN with no END after it ends the search (no later one has
    one either)."""
    spans = []
    at = 0
    while (begin := PRIVATE_KEY_BEGIN.search(text, at)) is not None:
        end = PRIVATE_KEY_END.search(text, begin.end())
        if end is None:
            break
        spans.append((begin.start(), end.end()))
        at = end.end()
    return spans


def _without_key_blocks(text: str) -> str:
    pieces, at = [], 0
    for start, end in key_blocks(text):
        pieces += [text[at:start], REDACTED]
        at = end
    return "".join(pieces) + text[at:] if pieces else text


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every given secret value, every private key block and every recognised
    token replaced."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    text = _without_key_blocks(text)
    for pattern in TOKEN_SHAPES:
        text = pattern.sub(REDACTED, text)
    return text


def find_secrets(text: str, secrets: Iterable[str] = ()) -> list[str]:
    """What :func:`redact` would replace, for reports ("member x holds a token")."""
    found = [value for value in secrets if value and value in text]
    found += [text[start:end] for start, end in key_blocks(text)]
    for pattern in TOKEN_SHAPES:
        found += [m.group(0) for m in pattern.finditer(text)]
    return found


def filtered_environment(env: Mapping[str, str], allow: Iterable[str] = DEFAULT_ENV_ALLOW) -> Environment:
    """Keep the variables matching an ``allow`` pattern, redact the secret ones among them
    (by name or by a token-looking value), and say what was dropped."""
    patterns = tuple(allow)
    secrets = secret_values(env)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    redacted: list[str] = []
    for name in sorted(env):
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            dropped.append(name)
            continue
        value = REDACTED if is_secret_name(name) else redact(env[name], secrets)
        if value != env[name]:
            redacted.append(name)
        kept[name] = value
    return Environment(kept, tuple(dropped), tuple(redacted))


def may_hold_secret(data: bytes, secrets: Sequence[str]) -> bool:
    """Whether ``data`` holds a secret value or a token's literal piece (:data:`TOKEN_NEEDLES`)."""
    return any(core in data and any(needle in data for needle in needles) for core, needles in TOKEN_NEEDLES) \
        or any(v.encode() in data for v in secrets if v)


def redact_bytes(data: bytes, secrets: Sequence[str]) -> bytes:
    """``data`` redacted as UTF-8 text (values and token shapes); other bytes: the values only."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        for value in secrets:
            data = data.replace(value.encode(), REDACTED.encode())
        return data
    if not may_hold_secret(data, secrets):
        return data
    clean = redact(text, secrets)
    return data if clean == text else clean.encode("utf-8")


def redact_data(value: Any, secrets: Sequence[str]) -> Any:
    """JSON data with every string redacted (numbers, keys and structure kept)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {k: redact_data(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v, secrets) for v in value]
    return value


REDACT_FILE_BYTES = 512 << 20
"""A run file larger than this is not rewritten at write time (a bundle leaves it out)."""


def redact_tree(root: Path, secrets: Sequence[str], max_bytes: int = REDACT_FILE_BYTES) -> list[str]:
    """Redact every regular file under ``root`` in place (a ``.json`` file as JSON data, so
    its numbers and structure stay valid); each rewrite is atomic. Returns the relative
    names of the files changed."""
    changed = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.stat().st_size > max_bytes:
            continue
        data = path.read_bytes()
        clean = redact_bytes(data, secrets)
        if clean != data and path.suffix == ".json":
            try:
                clean = (json.dumps(redact_data(json.loads(data), secrets), indent=2, ensure_ascii=False)
                         + "\n").encode("utf-8")
            except ValueError:
                pass
        if clean != data:
            mode = path.stat().st_mode & 0o7777
            atomic_write(path, clean)
            path.chmod(mode)  # an executable script the step wrote stays executable
            changed.append(path.relative_to(root).as_posix())
    return changed


def run_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secret values a run must not write: those of its own environment (``os.environ``)."""
    return secret_values(os.environ if env is None else env)
