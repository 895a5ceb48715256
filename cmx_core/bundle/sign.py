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


def check(manifest: bytes, signature: bytes, bundle: Path) -> str:
    """Check that ``signature`` is a good signature of ``manifest`` by *some* key (``ssh-keygen
    -Y check-novalidate``: no allowed signers, so it says nothing about who); returns the key
    (``ED25519 key SHA256:...``). A ResultsError for garbage or a signature of anything else."""
    if shutil.which("ssh-keygen") is None:
        return "an unknown key (ssh-keygen is missing, so the signature could not be read)"
    done = _run_on(signature, ["-Y", "check-novalidate", "-n", SIGNATURE_NAMESPACE], manifest)
    if done.returncode != 0:
        raise ResultsError(f"{bundle}: member cmx-bundle.json.sig is not a good signature of the manifest "
                           f"(garbage, or made for other bytes): {_last_line(done.stderr.decode(errors='replace'))}")
    line = _last_line(done.stdout.decode(errors="replace"))
    return line.split(" with ", 1)[1] if " with " in line else line


def principal(signature: bytes, allowed_signers: Path, bundle: Path) -> str:
    """The principal of ``allowed_signers`` whose key made ``signature``; a ResultsError when
    the key is not in the file (an unknown key)."""
    if not allowed_signers.is_file():
        raise UsageError(f"--allowed-signers {allowed_signers}: no such file")
    done = _run_on(signature, ["-Y", "find-principals", "-f", str(allowed_signers)], b"")
    names = done.stdout.decode(errors="replace").split()
    if done.returncode != 0 or not names:
        raise ResultsError(f"{bundle}: member cmx-bundle.json.sig: signed by a key that is not in {allowed_signers} "
                           "(an unknown key): refused")
    return names[0]


def _run_on(signature: bytes, args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    with tempfile.TemporaryDirectory(prefix="cmx-verify-") as tmp:
        sig = Path(tmp) / "manifest.sig"
        sig.write_bytes(signature)
        return subprocess.run([_ssh_keygen(), *args, "-s", str(sig)], input=stdin, capture_output=True,
                              timeout=_TIMEOUT_S, check=False)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
