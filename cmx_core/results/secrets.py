"""Secret scanning and redaction for anything cmx publishes (bundles, reports).

Two sources of secrets: the values of environment variables whose *names* say they hold a
secret (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``*_PASSWORD`` ...), and text that *looks*
like a well-known token format (``hf_...``, ``ghp_...``, ``AKIA...``, ``-----BEGIN ... PRIVATE
KEY-----``). :func:`redact` replaces both with :data:`REDACTED`; :func:`filtered_environment`
keeps only allow-listed variables and redacts the secret ones among them. Other publishers
(e.g. cmx-docker checking build args) can call these functions too.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REDACTED = "[REDACTED]"

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|AUTH|"
                         r"SESSION|COOKIE|_KEY$|^KEY$)", re.IGNORECASE)
"""An environment variable whose name matches holds a secret."""

TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),                      # Hugging Face
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),               # GitHub
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),                   # AWS access key id
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),                     # OpenAI-style keys
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),              # Slack
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)
"""Token formats recognised in any text, whatever variable (if any) they came from."""

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


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    return SECRET_NAME.search(name) is not None


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``env``'s secret-named variables, longest first (so that a secret which
    contains another is redacted whole)."""
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN}
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every given secret value and every recognised token replaced."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    for pattern in TOKEN_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def find_secrets(text: str, secrets: Iterable[str] = ()) -> list[str]:
    """What :func:`redact` would replace, for reports ("member x holds a token")."""
    found = [value for value in secrets if value and value in text]
    for pattern in TOKEN_PATTERNS:
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
