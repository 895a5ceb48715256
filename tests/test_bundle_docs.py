"""The claims of docs/bundles.md, docs/results.md (hardware class) and docs/reports.md that
no other test covers: the drift classes, the secret patterns, what is skipped, the defaults."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from cmx_core.bundle.pack import MAX_FILE_BYTES, BundleOptions, create_bundle
from cmx_core.bundle.verdict import DEFAULT_TOLERANCE
from cmx_core.results.secrets import REDACTED, filtered_environment, is_secret_name, redact
from cmx_core.run.lock import DRIFT_CLASSES, HARDWARE_FACTS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_drift_classes_table_matches_the_code() -> None:
    text = (DOCS / "bundles.md").read_text()
    table = re.findall(r"^\| `([a-z]+)` \| ", text, flags=re.MULTILINE)
    assert set(DRIFT_CLASSES) <= set(table)
    for fact in HARDWARE_FACTS:
        assert f"`{fact}`" in text
    assert DEFAULT_TOLERANCE == 0.05 and "default 5 %" in text
    assert MAX_FILE_BYTES == 512 << 20 and "512 MiB" in text


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "OPENAI_API_KEY", "SSH_KEY"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "CUDA_VISIBLE_DEVICES", "KEYBOARD_LAYOUT", "OMP_NUM_THREADS",
                                  "RAY_AUTH_MODE", "KUBE_AUTH_TYPE", "SSH_AUTH_METHOD", "AUTH_ENABLED"])
def test_plain_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("token", [
    "hf_" + "a" * 30, "ghp_" + "B" * 36, "AKIA" + "ABCDEFGHIJKLMNOP", "sk-" + "x" * 40,
    "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----",
])
def test_token_patterns_are_redacted(token: str) -> None:
    assert redact(f"before {token} after") == f"before {REDACTED} after"


def test_allow_list_and_redaction() -> None:
    env = filtered_environment({"PATH": "/bin", "HOME": "/root", "CMX_TOKEN": "abcd1234", "OMP_NUM_THREADS": "4"})
    assert dict(env.kept) == {"PATH": "/bin", "CMX_TOKEN": REDACTED, "OMP_NUM_THREADS": "4"}
    assert env.dropped == ("HOME",) and env.redacted == ("CMX_TOKEN",)


def test_links_and_large_files_are_skipped_with_a_reason(cmx_home: Path, tmp_path: Path) -> None:
    from cmx_core.run import engine

    run_dir = engine.run_tags(["demo", "sort"], {"size": 5, "repeats": 1}).run_dir
    (run_dir / "big.bin").write_bytes(b"x" * 200_000)
    (run_dir / "link").symlink_to("/etc/hostname")
    created = create_bundle([run_dir], tmp_path / "b.tar.gz", BundleOptions(env={}, max_file_bytes=100_000))
    skipped = created.manifest.skipped
    assert "over the 100000-byte limit" in skipped[f"runs/{run_dir.name}/big.bin"]
    assert "not a regular file" in skipped[f"runs/{run_dir.name}/link"]
    with tarfile.open(tmp_path / "b.tar.gz") as archive:
        names = archive.getnames()
        manifest = json.loads(archive.extractfile("cmx-bundle.json").read())  # type: ignore[union-attr]
    assert f"runs/{run_dir.name}/big.bin" not in names and manifest["skipped"] == dict(sorted(skipped.items()))


def test_hardware_class_labels_in_results_md() -> None:
    from cmx_core.results.facts_map import system_section
    from cmx_core.results.hardware import from_system

    text = " ".join((DOCS / "results.md").read_text().split())
    facts = Path(__file__).resolve().parent.parent / "examples" / "facts"
    for name, shown in (("h100-sxm-8x", "8x h100 80GiB nvlink drv550 | Intel(R) Xeon(R) Platinum 8480+ 112c | 2015GiB"),
                        ("l4-1x", "1x l4 22GiB pcie drv535 |")):
        label = from_system(system_section(json.loads((facts / f"{name}.json").read_text())["facts"])).label
        assert label.startswith(shown) and shown in text


def test_replay_trust_and_bounds_claims_match_the_code() -> None:
    from cmx_core.bundle.members import MAX_MEMBER_BYTES, MAX_MEMBERS, MAX_TOTAL_BYTES
    from cmx_core.bundle.replay import MIN_REPEATS
    from cmx_core.bundle.trust import REQUIRE_ENV, SIGNERS_ENV, SIGNERS_FILE
    from cmx_core.results.noise import CONFIDENCE, MIN_SAMPLES, RESAMPLES, SEED

    text = " ".join((DOCS / "bundles.md").read_text().split())
    assert MIN_REPEATS == MIN_SAMPLES == 3 and "at least 3" in text and "fewer than 3 samples" in text
    assert (CONFIDENCE, RESAMPLES, SEED) == (0.95, 2000, 0) and "2000 resamples, seed 0" in text
    assert "bootstrap 95 % interval of the relative difference of the medians" in text
    assert MAX_TOTAL_BYTES == 16 << 30 and MAX_MEMBERS == 100000 and MAX_MEMBER_BYTES == 4 << 30
    assert "16 GiB" in text and "100000" in text and "4 GiB" in text
    assert f"{REQUIRE_ENV}=1" in text and SIGNERS_ENV in text and f"data/{SIGNERS_FILE}" in text
