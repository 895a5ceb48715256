"""Which signatures a reader trusts: the signature policy of verify, import and replay.

A bundle's manifest seals every member, but anyone can make a bundle and seal it, so only a
signature by a key the reader already trusts says *who* made it. The policy:

* ``allowed_signers``: an ssh ``allowed_signers`` file (the format git uses): the keys this
  reader trusts. From ``--allowed-signers FILE``, else ``CMX_ALLOWED_SIGNERS``, else the
  config file ``<data dir>/allowed_signers`` when it exists. With one, a signature must
  verify against it (``identity``, from ``--identity``, narrows it to one principal; without
  it the signing key's principal is looked up in the file). ``--allowed-signers`` on the
  command line also requires a signature.
* ``require``: ``--require-signature`` or the setting ``CMX_REQUIRE_SIGNATURE=1``: an
  unsigned (or stripped) bundle, a key not in the file and a bad signature are all refused;
  requiring a signature without an allowed-signers file is a usage error.

Without a requirement an unsigned bundle, or a signed one with no allowed-signers file, is
read, and the status says plainly that no signature was checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx_core import paths
from cmx_core.errors import UsageError

REQUIRE_ENV = "CMX_REQUIRE_SIGNATURE"
SIGNERS_ENV = "CMX_ALLOWED_SIGNERS"
SIGNERS_FILE = "allowed_signers"
"""The config file of trusted keys, in cmx's data directory."""


@dataclass(frozen=True)
class TrustPolicy:
    require: bool = False
    allowed_signers: Path | None = None
    identity: str | None = None


def policy(allowed_signers: str | None = None, identity: str | None = None, require: bool = False,
           env: Mapping[str, str] | None = None) -> TrustPolicy:
    """The policy from the command line, then the environment, then the config file."""
    env = os.environ if env is None else env
    setting = env.get(REQUIRE_ENV, "").strip().lower()
    if setting not in ("", "0", "1", "true", "false", "yes", "no"):
        raise UsageError(f"{REQUIRE_ENV}={env[REQUIRE_ENV]!r}: give 1 or 0")
    require = require or setting in ("1", "true", "yes") or bool(allowed_signers)
    signers = allowed_signers or env.get(SIGNERS_ENV) or None
    if signers is None and (paths.data_dir() / SIGNERS_FILE).is_file():
        signers = str(paths.data_dir() / SIGNERS_FILE)
    if identity and not signers:
        raise UsageError("--identity needs --allowed-signers FILE (or CMX_ALLOWED_SIGNERS)")
    if require and not signers:
        raise UsageError(f"a signature is required (--require-signature or {REQUIRE_ENV}) but no allowed signers "
                         f"are configured: give --allowed-signers FILE, set {SIGNERS_ENV} or write "
                         f"{paths.data_dir() / SIGNERS_FILE}")
    return TrustPolicy(require, Path(signers) if signers else None, identity or None)
