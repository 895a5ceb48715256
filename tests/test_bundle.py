"""cmx bundle create|verify|import on a real MLPerf (LoadGen) run: every member is sealed by the
manifest (one flipped byte in any member, a member added or removed, an unsafe member: exit 2
with the member named), no secret of the environment reaches any member, the RO-Crate
metadata reads back with the rocrate library, ssh signatures verify, and a verified bundle's
runs land in another store marked with their origin."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core.cli.main import main

HF_TOKEN = "hf_FAKEabcdefghijklmnopqrstuvwxyz0123"
CMX_TOKEN = "cmx-fake-secret-7f3a9c2e"
GH_VALUE = "ghp_FAKE0123456789abcdefghijklmnopqrst"


def _cmx(*args: Any) -> tuple[int, str]:
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in args])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One MLPerf classifier run and one demo run in home A, bundled with fake tokens in the
    environment (and one leaked into a log, as a careless step might)."""
    home = tmp_path_factory.mktemp("home-a")
    out = tmp_path_factory.mktemp("bundles")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CMX_HOME", str(home))
        patch.setenv("HF_TOKEN", HF_TOKEN)
        patch.setenv("CMX_API_TOKEN", CMX_TOKEN)
        patch.setenv("CUDA_CACHE_HINT", GH_VALUE)  # allow-listed name, token-looking value
        code, text = _cmx("run", "recipe", "--tags=mlperf,classifier", "--duration_s=0.2", "--json")
        assert code == 0, text
        mlperf = json.loads(text)
        code, text = _cmx("run", "recipe", "--tags=demo,sort", "--size=5", "--repeats=1", "--json")
        assert code == 0, text
        demo = json.loads(text)
        run_dirs = [Path(p).parent for p in (home / "data" / "runs").glob("*/result.json")]
        leaky = next(d for d in run_dirs if "demo-sort" in d.name) / "nodes" / "leaky.log"
        leaky.write_text(f"step printed its env: HF_TOKEN={HF_TOKEN} token={CMX_TOKEN}\n")
        bundle = out / "runs.tar.gz"
        code, text = _cmx("bundle", "create", mlperf["run_id"], demo["run_id"][:8], "-o", bundle, "--json")
        assert code == 0, text
        yield {"bundle": bundle, "created": json.loads(text), "mlperf": mlperf, "demo": demo, "home": home}


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}  # type: ignore[union-attr]


def _write(path: Path, members: dict[str, bytes], extra: Callable[[tarfile.TarFile], None] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if extra:
            extra(archive)
    return path


def _verify(cli: Callable[..., Any], bundle: Path) -> Any:
    return cli("bundle", "verify", bundle)


def test_bundle_holds_the_mlperf_run_and_verifies(made: dict[str, Any], cli: Callable[..., Any]) -> None:
    members = _members(made["bundle"])
    mlperf_dir = next(r["dir"] for r in made["created"]["runs"] if r["run_id"] == made["mlperf"]["run_id"])
    for name in ("lock.json", "result.json", "plan.json", "nodes.json", "facts.json"):
        assert f"runs/{mlperf_dir}/{name}" in members
    assert any(n.endswith("mlperf_log_detail.txt") for n in members)  # the raw LoadGen logs
    assert {"cmx-bundle.json", "ro-crate-metadata.json", "environment.json"} <= set(members)
    done = cli("bundle", "verify", made["bundle"], "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["verified"] is True and report["members"] == len(members) and report["signature"] == "unsigned"


def test_no_secret_reaches_any_member(made: dict[str, Any]) -> None:
    members = _members(made["bundle"])
    for name, data in members.items():
        for secret in (HF_TOKEN, CMX_TOKEN, GH_VALUE):
            assert secret.encode() not in data, f"{secret} in {name}"
    env = json.loads(members["environment.json"])
    assert env["variables"]["CMX_API_TOKEN"] == "[REDACTED]"
    assert env["variables"]["CUDA_CACHE_HINT"] == "[REDACTED]"
    assert "HF_TOKEN" in env["dropped"] and "HF_TOKEN" not in env["variables"]
    assert "PATH" in env["variables"]
    leaky = next(n for n in members if n.endswith("nodes/leaky.log"))
    assert leaky in made["created"]["redacted"] and b"[REDACTED]" in members[leaky]


def test_one_flipped_byte_in_any_member_is_caught(made: dict[str, Any], cli: Callable[..., Any],
                                                  tmp_path: Path) -> None:
    members = _members(made["bundle"])
    assert len(members) > 10
    for index, name in enumerate(sorted(members)):
        data = bytearray(members[name] or b"\x00")  # an empty member (LoadGen's trace) gains a byte instead
        if members[name]:
            data[len(data) // 2] ^= 0x01
        bad = _write(tmp_path / f"flip-{index}.tar.gz", {**members, name: bytes(data)})
        done = _verify(cli, bad)
        assert done.code == 2, name
        assert f"member {name}" in done.err and "Traceback" not in done.err
        assert len(done.err_lines) == 1


def test_added_and_removed_members_are_caught(made: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    members = _members(made["bundle"])
    added = _verify(cli, _write(tmp_path / "added.tar.gz", {**members, "runs/extra.txt": b"x"}))
    assert added.code == 2 and "member runs/extra.txt is not in the manifest" in added.err
    signature = _verify(cli, _write(tmp_path / "sig.tar.gz", {**members, "cmx-bundle.json.sig": b"x"}))
    assert signature.code == 2 and "cmx-bundle.json.sig" in signature.err
    for name in sorted(members):
        kept = {n: d for n, d in members.items() if n != name}
        done = _verify(cli, _write(tmp_path / "removed.tar.gz", kept))
        assert done.code == 2 and f"member {name}" in done.err, name


@pytest.mark.parametrize("kind", ["traversal", "absolute", "symlink", "hardlink", "duplicate"])
def test_unsafe_members_are_refused(made: dict[str, Any], cli: Callable[..., Any], tmp_path: Path,
                                    kind: str) -> None:
    members = _members(made["bundle"])

    def extra(archive: tarfile.TarFile) -> None:
        info = tarfile.TarInfo({"traversal": "../x", "absolute": "/tmp/x", "symlink": "runs/link",
                                "hardlink": "runs/hard", "duplicate": "environment.json"}[kind])
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        elif kind == "hardlink":
            info.type, info.linkname = tarfile.LNKTYPE, "environment.json"
        info.size = 0 if kind in ("symlink", "hardlink") else 1
        archive.addfile(info, io.BytesIO(b"x"))

    done = _verify(cli, _write(tmp_path / f"{kind}.tar.gz", members, extra))
    assert done.code == 2 and "Traceback" not in done.err
    assert {"traversal": "../x", "absolute": "/tmp/x", "symlink": "runs/link", "hardlink": "runs/hard",
            "duplicate": "environment.json"}[kind] in done.err
    assert not (tmp_path.parent / "x").exists()


def test_damaged_file_and_not_a_bundle(cli: Callable[..., Any], tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b not really gzip")
    done = _verify(cli, junk)
    assert done.code == 2 and "junk.tar.gz" in done.err and "Traceback" not in done.err
    missing = _verify(cli, tmp_path / "nope.tar.gz")
    assert missing.code == 2 and "no such bundle file" in missing.err
    empty = _verify(cli, _write(tmp_path / "empty.tar.gz", {"a.txt": b"a"}))
    assert empty.code == 2 and "cmx-bundle.json is missing" in empty.err


def test_ro_crate_metadata_follows_the_workflow_run_profile(made: dict[str, Any], tmp_path: Path) -> None:
    from rocrate.rocrate import ROCrate

    members = _members(made["bundle"])
    root = tmp_path / "crate"
    for name, data in members.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    crate = ROCrate(root)
    profiles = {p["@id"] if isinstance(p, dict) else p.id for p in crate.root_dataset["conformsTo"]}
    assert "https://w3id.org/ro/wfrun/workflow/0.5" in profiles and "https://w3id.org/ro/wfrun/process/0.5" in profiles
    main_entity = crate.mainEntity
    assert "ComputationalWorkflow" in main_entity.type and main_entity.id.endswith("/plan.json")
    actions = crate.get_by_type("CreateAction")
    assert {a.id for a in actions} == {f"#run-{r['run_id']}" for r in made["created"]["runs"]}
    for action in actions:
        assert action["instrument"].id.endswith("/plan.json")
        results = {e.id.rsplit("/", 1)[-1] for e in action["result"]}
        assert "result.json" in results and action["startTime"] and action["endTime"]


def test_import_into_another_home_marks_the_origin(made: dict[str, Any], cli: Callable[..., Any],
                                                   cmx_home: Path) -> None:
    done = cli("bundle", "import", made["bundle"], "--json")
    assert done.code == 0, done.err
    imported = json.loads(done.out)["imported"]
    assert {i["run_id"] for i in imported} == {made["mlperf"]["run_id"], made["demo"]["run_id"]}
    assert all(Path(i["run_dir"]).is_relative_to(cmx_home) for i in imported)
    shown = json.loads(cli("results", "show", made["mlperf"]["run_id"], "--json").out)
    origin = shown["provenance"]["origin"]
    assert origin["kind"] == "bundle" and origin["bundle"] == "runs.tar.gz" and len(origin["bundle_sha256"]) == 64
    assert shown["metrics"] == made["mlperf"]["metrics"]
    again = json.loads(cli("bundle", "import", made["bundle"], "--json").out)
    assert again["imported"] == [] and len(again["already"]) == 2


def test_a_bundle_that_fails_is_never_imported(made: dict[str, Any], cli: Callable[..., Any], tmp_path: Path,
                                               cmx_home: Path) -> None:
    members = _members(made["bundle"])
    name = next(n for n in members if n.endswith("result.json"))
    bad = _write(tmp_path / "bad.tar.gz", {**members, name: members[name].replace(b'"valid"', b'"VALID"', 1)})
    done = cli("bundle", "import", bad)
    assert done.code == 2 and f"member {name}" in done.err
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []
    assert not (cmx_home / "data" / "runs").exists() or not any((cmx_home / "data" / "runs").iterdir())
    replay = cli("bundle", "replay", bad)
    assert replay.code == 2 and f"member {name}" in replay.err


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is not installed")
def test_signed_bundle(made: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@example.org", "-f", str(key)],
                   check=True, timeout=60)
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"alice@example.org {key.with_suffix('.pub').read_text().strip()}\n")
    run_dir = next(Path(i) for i in (made["home"] / "data" / "runs").glob("*demo-sort*"))
    signed = tmp_path / "signed.tar.gz"
    assert cli("bundle", "create", run_dir, "-o", signed, "--sign", "--key", key).code == 0
    ok = cli("bundle", "verify", signed, "--allowed-signers", signers, "--identity", "alice@example.org", "--json")
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)["signature"].startswith("verified")
    wrong = cli("bundle", "verify", signed, "--allowed-signers", signers, "--identity", "mallory@example.org")
    assert wrong.code == 2 and "does not verify" in wrong.err
    members = _members(signed)
    stripped = _write(tmp_path / "stripped.tar.gz", {n: d for n, d in members.items() if n != "cmx-bundle.json.sig"})
    gone = cli("bundle", "verify", stripped)
    assert gone.code == 2 and "cmx-bundle.json.sig is missing" in gone.err
    unsigned = cli("bundle", "verify", made["bundle"], "--allowed-signers", signers, "--identity", "alice@example.org")
    assert unsigned.code == 2 and "not signed" in unsigned.err
    nokey = cli("bundle", "create", run_dir, "-o", tmp_path / "x.tar.gz", "--sign")
    assert nokey.code == 2 and "--sign needs a key" in nokey.err and not (tmp_path / "x.tar.gz").exists()


def test_bad_create_arguments(cli: Callable[..., Any], tmp_path: Path) -> None:
    done = cli("bundle", "create", tmp_path, "-o", tmp_path / "b.tar.gz")
    assert done.code == 2 and "not a run directory" in done.err
    done = cli("bundle", "create", "no-such-run", "-o", tmp_path / "b.zip")
    assert done.code == 2 and "Traceback" not in done.err
    assert not (tmp_path / "b.tar.gz").exists()


def test_replaying_the_mlperf_run_on_the_same_machine_never_differs(made: dict[str, Any],
                                                                     cli: Callable[..., Any]) -> None:
    """The LoadGen run and the demo run, one sample each in the bundle, replayed once here
    (--repeats 1 keeps the test short; the default 3 gives the same verdicts, since the
    original's one sample is what the rule lacks): its timings are inconclusive, its counts
    reproduced, and nothing "differs", so --check exits 0."""
    done = cli("bundle", "replay", made["bundle"], "--check", "--repeats", "1", "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert len(report["comparisons"]) == 2 and len(report["replays"]) == 2
    for comparison in report["comparisons"]:
        assert comparison["verdict"] in ("reproduced", "within noise", "inconclusive"), comparison["reason"]
        assert not [m["name"] for m in comparison["metrics"] if m["verdict"] == "differs"]
    mlperf = next(c for c in report["comparisons"] if made["mlperf"]["run_id"] in c["original_runs"])
    assert len(mlperf["metrics"]) >= 10 and mlperf["verdict"] == "inconclusive"
