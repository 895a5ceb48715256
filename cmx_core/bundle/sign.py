"""Signatures of the manifest with an ssh key, through ``ssh-keygen -Y sign|verify`` (OpenSSH
8.1+: the key people already have, no new key format). PyNaCl or minisign would add a
dependency and a key format for the same promise. Arguments are lists, never a shell."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from cmx_core.bundle import SIGNATURE_NAMESPACE
from cmx_core.errors import ResultsError, UsageError

_TIMEOUT_S = 60


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise UsageError("--sign needs ssh-keygen (OpenSSH 8.1 or newer): apt-get install -y openssh-client")
    return found


def sign(manifest: bytes, key: Path) -> bytes:
    """The ssh signature of ``manifest`` by the private ``key``."""
    if not key.is_file():
        raise UsageError(f"--key {key}: no such private key file")
    with tempfile.TemporaryDirectory(prefix="cmx-sign-") as tmp:
        message = Path(tmp) / "manifest"
        message.write_bytes(manifest)
        done = subprocess.run([_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", SIGNATURE_NAMESPACE, str(message)],
                              capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              check=False)
        if done.returncode != 0:
            raise UsageError(f"--key {key}: ssh-keygen could not sign: {_last_line(done.stderr)}")
        return (Path(tmp) / "manifest.sig").read_bytes()


def verify(manifest: bytes, signature: bytes, allowed_signers: Path, identity: str, bundle: Path) -> str:
    """Check ``signature`` against an ssh ``allowed_signers`` file; returns ssh-keygen's line."""
    if not allowed_signers.is_file():
        raise UsageError(f"--allowed-signers {allowed_signers}: no such file")
    with tempfile.TemporaryDirectory(prefix="cmx-verify-") as tmp:
        sig = Path(tmp) / "manifest.sig"
        sig.write_bytes(signature)
        done = subprocess.run(
            [_ssh_keygen(), "-Y", "verify", "-f", str(allowed_signers), "-I", identity, "-n", SIGNATURE_NAMESPACE,
             "-s", str(sig)], input=manifest, capture_output=True, timeout=_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise ResultsError(f"{bundle}: member cmx-bundle.json.sig: the signature does not verify for {identity!r} "
                           f"with {allowed_signers}: {_last_line(done.stderr.decode(errors='replace'))}")
    return _last_line(done.stdout.decode(errors="replace"))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
