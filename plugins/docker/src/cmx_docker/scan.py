"""The secret scan of a build context, run before every build: a context holding a secret is
refused with one line naming the file, and nothing is built.

What counts as a secret (the rules of :mod:`cmx_core.results.secrets`, which bundles and reports use
too; nothing here repeats them):

* the value of any variable of this process's environment whose name says it is one
  (``cmx_core.results.secrets.is_secret_name``: ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
  ``*API_KEY*``, ``*CREDENTIAL*`` ...), 8 characters or longer here (a shorter value would
  match by chance in the bytes of a wheel): what a user has exported must never be baked in;
* text in one of the token formats ``cmx_core.results.secrets.TOKEN_PATTERNS`` knows (a private key
  block's BEGIN line, an AWS access key id, Hugging Face, GitHub, OpenAI-style and Slack tokens);
* a file named like a credentials store (``.env``, ``.netrc``, ``.pypirc``,
  ``.git-credentials``, ``credentials``, ``.aws_credentials``, ``id_rsa``, ``id_ed25519``).

Scanned: every file of the context (Dockerfile, lock, CA bundle, template files) and every
member of the wheels built from the checkout. The third-party wheels of the wheelhouse are
not opened: they are the index's pinned releases, not the user's files.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from cmx_core.api import TOKEN_PATTERNS, is_secret_name
from cmx_docker.errors import ContextError

CREDENTIAL_NAMES = frozenset({".env", ".netrc", ".pypirc", ".git-credentials", "credentials", ".aws_credentials",
                              "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"})
_MIN_VALUE = 8


def environment_secrets(environ: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """Name -> value of the secret-named variables of ``environ`` (default: ours)."""
    env = os.environ if environ is None else environ
    return {k: v.encode() for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_VALUE}


def find_secret(data: bytes, secrets: Mapping[str, bytes]) -> str | None:
    """Why ``data`` holds a secret (the variable's name, never its value), or None."""
    for name, value in secrets.items():
        if value in data:
            return f"the value of ${name}"
    text = data.decode("latin-1")  # every byte a character: the patterns are ASCII
    for pattern in TOKEN_PATTERNS:
        match = pattern.search(text)
        if match:
            return _kind(match.group(0))
    return None


def _kind(token: str) -> str:
    """What a matched token is, without its value."""
    if token.startswith("-----BEGIN"):
        return "a private key block"
    if token[:4] in ("AKIA", "ASIA"):
        return "an AWS access key id"
    return f"a token of a known format ({token[:3]}...)"


def scan_context(ctx: Path, wheels: Iterable[Path] = (), skip: Iterable[Path] = (),
                 environ: Mapping[str, str] | None = None) -> None:
    """Raise a one-line ContextError for the first file of ``ctx`` (or member of ``wheels``)
    holding a secret; files in ``skip`` (the wheelhouse's) are not read."""
    secrets = environment_secrets(environ)
    skipped = {p.resolve() for p in skip}
    opened = {p.resolve() for p in wheels}
    for path in sorted(p for p in ctx.rglob("*") if p.is_file()):
        where = path.relative_to(ctx)
        if path.resolve() in skipped and path.resolve() not in opened:
            continue
        if path.resolve() in opened:
            for member, data in _members(path):
                _check(f"{where} (member {member})", Path(member).name, data, secrets)
        else:
            _check(str(where), path.name, path.read_bytes(), secrets)


def _members(wheel: Path) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.is_dir():
                yield info.filename, archive.read(info)


def _check(where: str, name: str, data: bytes, secrets: Mapping[str, bytes]) -> None:
    why = f"a file named {name!r} (a credentials store)" if name in CREDENTIAL_NAMES else find_secret(data, secrets)
    if why:
        raise ContextError(f"build context file {where} holds {why}; nothing was built: remove it from the "
                           "checkout's tracked files or the template's context, then build again")
