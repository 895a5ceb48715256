"""Signature policy and import bounds (#35 c, d): verify, import and replay say plainly when no
signature was checked; with --require-signature (or CMX_REQUIRE_SIGNATURE=1, the allowed
signers from the flag, CMX_ALLOWED_SIGNERS or the config file) an unsigned, stripped,
unknown-key or bad signature is refused with exit 2; a garbage signature is refused under any
policy; a bundle over the total-size or member-count cap is refused before anything is written."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.bundle.manifest import parse_manifest
from cmx_core.bundle.members import MAX_MEMBERS, MAX_TOTAL_BYTES

needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}  # type: ignore[union-attr]


def _write(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _key(tmp_path: Path, who: str) -> tuple[Path, str]:
    key = tmp_path / f"id-{who.split('@')[0]}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(key)], check=True, timeout=60)
    return key, f"{who} {key.with_suffix('.pub').read_text().strip()}\n"


@pytest.fixture
def signed(cli: Callable[..., Any], tmp_path: Path) -> dict[str, Any]:
    done = cli("run", "recipe", "--tags=demo,sort", "--size=5", "--repeats=1", "--json")
    assert done.code == 0, done.err
    run_id = json.loads(done.out)["run_id"]
    alice, alice_line = _key(tmp_path, "alice@example.org")
    mallory, _ = _key(tmp_path, "mallory@example.org")
    signers = tmp_path / "allowed_signers"
    signers.write_text(alice_line)
    bundle = tmp_path / "signed.tar.gz"
    assert cli("bundle", "create", run_id, "-o", bundle, "--sign", "--key", alice).code == 0
    unsigned = tmp_path / "unsigned.tar.gz"
    assert cli("bundle", "create", run_id, "-o", unsigned).code == 0
    return {"bundle": bundle, "unsigned": unsigned, "signers": signers, "mallory": mallory, "run_id": run_id}


def _stripped(bundle: Path, out: Path) -> Path:
    """The signature removed and the manifest resealed as unsigned: what anyone can do."""
    members = _members(bundle)
    manifest = parse_manifest(members.pop("cmx-bundle.json"), str(bundle))
    members.pop("cmx-bundle.json.sig")
    return _write(out, {**members, "cmx-bundle.json": dataclasses.replace(manifest, signed=False).to_bytes()})


def _resigned(bundle: Path, key: Path, out: Path) -> Path:
    """The manifest signed again by another key: a good signature, by a key nobody trusts."""
    from cmx_core.bundle.sign import sign

    members = _members(bundle)
    return _write(out, {**members, "cmx-bundle.json.sig": sign(members["cmx-bundle.json"], key)})


@needs_ssh
def test_without_a_policy_the_status_says_not_checked(signed: dict[str, Any], cli: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    for bundle in (signed["bundle"], signed["unsigned"], _stripped(signed["bundle"], tmp_path / "s.tar.gz"),
                   _resigned(signed["bundle"], signed["mallory"], tmp_path / "m.tar.gz")):
        done = cli("bundle", "verify", bundle, "--json")
        assert done.code == 0, done.err
        report = json.loads(done.out)
        assert report["signature_checked"] is False
        assert report["signature"] == "unsigned" or report["signature"].endswith(", not checked")
        assert "warning:" in done.err and "signature not checked" in done.err and "nothing says who" in done.err
    imported = cli("bundle", "import", signed["unsigned"], "--json")
    assert imported.code == 0 and json.loads(imported.out)["signature_checked"] is False
    assert "signature not checked" in imported.err


@needs_ssh
@pytest.mark.parametrize("case", ["unsigned", "stripped", "garbage", "other-key"])
def test_required_signatures_refuse(case: str, signed: dict[str, Any], cli: Callable[..., Any],
                                    tmp_path: Path, cmx_home: Path) -> None:
    members = _members(signed["bundle"])
    bundle = {"unsigned": lambda: signed["unsigned"],
              "stripped": lambda: _stripped(signed["bundle"], tmp_path / "x.tar.gz"),
              "garbage": lambda: _write(tmp_path / "x.tar.gz", {**members, "cmx-bundle.json.sig": b"garbage\n"}),
              "other-key": lambda: _resigned(signed["bundle"], signed["mallory"], tmp_path / "x.tar.gz")}[case]()
    for action in ("verify", "import", "replay"):
        done = cli("bundle", action, bundle, "--require-signature", "--allowed-signers", signed["signers"])
        assert done.code == 2 and len(done.err_lines) == 1 and "Traceback" not in done.err, (action, done.err)
        assert "cmx-bundle.json.sig" in done.err
    listed = json.loads(cli("results", "list", "--json").out)["runs"]
    assert [r["run_id"] for r in listed] == [signed["run_id"]]  # nothing imported or replayed
    assert len(list((cmx_home / "data" / "runs").iterdir())) == 1


@needs_ssh
def test_garbage_is_refused_under_any_policy(signed: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    members = _members(signed["bundle"])
    garbage = _write(tmp_path / "g.tar.gz", {**members, "cmx-bundle.json.sig": b"garbage\n"})
    done = cli("bundle", "verify", garbage)
    assert done.code == 2 and "not a good signature" in done.err


@needs_ssh
def test_the_setting_and_the_config_file(signed: dict[str, Any], cli: Callable[..., Any], cmx_home: Path,
                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CMX_REQUIRE_SIGNATURE", "1")
    none = cli("bundle", "verify", signed["bundle"])
    assert none.code == 2 and "no allowed signers" in none.err and len(none.err_lines) == 1
    monkeypatch.setenv("CMX_ALLOWED_SIGNERS", str(signed["signers"]))
    by_env = cli("bundle", "verify", signed["bundle"], "--json")
    assert by_env.code == 0 and json.loads(by_env.out)["signature_checked"] is True, by_env.err
    assert cli("bundle", "verify", signed["unsigned"]).code == 2
    monkeypatch.delenv("CMX_ALLOWED_SIGNERS")
    from cmx_core import paths

    (paths.data_dir()).mkdir(parents=True, exist_ok=True)
    shutil.copy(signed["signers"], paths.data_dir() / "allowed_signers")
    ok = cli("bundle", "verify", signed["bundle"], "--json")
    assert ok.code == 0, ok.err
    report = json.loads(ok.out)
    assert report["signature_checked"] is True and report["signature"].startswith("verified")
    assert "warning" not in ok.err
    other = cli("bundle", "verify", _resigned(signed["bundle"], signed["mallory"], tmp_path / "m.tar.gz"))
    assert other.code == 2 and "unknown key" in other.err
    assert cli("bundle", "verify", signed["unsigned"]).code == 2
    monkeypatch.setenv("CMX_REQUIRE_SIGNATURE", "maybe")
    assert cli("bundle", "verify", signed["bundle"]).code == 2


def test_import_bounds_refuse_before_writing(cli: Callable[..., Any], tmp_path: Path, cmx_home: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    done = cli("run", "recipe", "--tags=demo,sort", "--size=5", "--repeats=1", "--json")
    assert done.code == 0, done.err
    run_id = json.loads(done.out)["run_id"]
    bundle = tmp_path / "b.tar.gz"
    assert cli("bundle", "create", run_id, "-o", bundle).code == 0
    total = sum(len(d) for d in _members(bundle).values())
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home-b"))  # an empty store to import into
    runs = tmp_path / "home-b" / "data" / "runs"
    over = cli("bundle", "import", bundle, "--max-bytes", str(total - 1))
    assert over.code == 2 and len(over.err_lines) == 1 and "--max-bytes" in over.err
    assert not runs.exists() or not any(runs.iterdir())
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []
    count = len(_members(bundle))
    many = cli("bundle", "import", bundle, "--max-members", str(count - 1))
    assert many.code == 2 and "--max-members" in many.err and (not runs.exists() or not any(runs.iterdir()))
    monkeypatch.setenv("CMX_BUNDLE_MAX_BYTES", str(total - 1))
    assert cli("bundle", "verify", bundle).code == 2
    assert cli("bundle", "verify", bundle, "--max-bytes", str(total)).code == 0  # the flag wins
    monkeypatch.delenv("CMX_BUNDLE_MAX_BYTES")
    assert cli("bundle", "import", bundle, "--max-bytes", str(total), "--max-members", str(count)).code == 0
    assert cli("bundle", "verify", bundle, "--max-bytes", "0").code == 2
    assert MAX_TOTAL_BYTES == 16 << 30 and MAX_MEMBERS == 100_000
