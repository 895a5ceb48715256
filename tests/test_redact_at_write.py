"""Redaction at write time (#35 b): a run replaces the values of its own secret-named
environment variables, and any known token shape, in the logs, outputs and result it writes;
a bundle made later from a shell without that variable holds none of them."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.results.secrets import REDACTED, redact_data, redact_tree

SECRET = "s3cr3t-Value-0f-the-run-42"
SHAPED = "hf_" + "Q" * 32
RECIPE = """
name: leaky
tags: [leaky]
summary: a step that prints its token
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["sh", "-c", "echo token=$MY_SERVICE_TOKEN also {shaped}; echo NOTE=$MY_SERVICE_TOKEN; echo ITEMS=3"]
      env_allow: [MY_SERVICE_TOKEN]
      metrics:
        items: {{kv: ITEMS, unit: items}}
"""


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}  # type: ignore[union-attr]


def test_a_printed_env_token_never_reaches_the_bundle(cli: Callable[..., Any], recipes: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    recipes("leaky", RECIPE.format(shaped=SHAPED))
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    done = cli("run", "recipe", "--tags=leaky", "--recipes", recipes.dir, "--json")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    monkeypatch.delenv("MY_SERVICE_TOKEN")  # the bundling shell does not know the value
    bundle = tmp_path / "b.tar.gz"
    created = cli("bundle", "create", document["run_id"], "-o", bundle, "--json")
    assert created.code == 0, created.err
    members = _members(bundle)
    logs = [data for name, data in members.items() if name.endswith("stdout.txt")]
    assert logs and all(REDACTED.encode() in log for log in logs)
    for name, data in members.items():
        assert SECRET.encode() not in data and SHAPED.encode() not in data, name
    # the run directory itself holds no copy either: redacted when written, not when bundled
    from cmx_core import paths

    for path in paths.runs_dir().rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_json_files_stay_json_and_numbers_stay_numbers(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text(json.dumps({"n": 12345, "note": "key 12345 here"}))
    (tmp_path / "log.txt").write_text("value 12345\n")
    (tmp_path / "log.txt").chmod(0o750)
    changed = redact_tree(tmp_path, ["12345"])
    assert (tmp_path / "log.txt").stat().st_mode & 0o777 == 0o750
    assert changed == ["log.txt", "out.json"]
    assert json.loads((tmp_path / "out.json").read_text()) == {"n": 12345, "note": f"key {REDACTED} here"}
    assert (tmp_path / "log.txt").read_text() == f"value {REDACTED}\n"
    assert redact_data({"a": [SHAPED, 1.5]}, ()) == {"a": [REDACTED, 1.5]}


TOKENS = ("hf_" + "a" * 25, "ghp_" + "b" * 25, "gho_" + "c" * 22, "ghs_" + "c" * 22, "github_pat_" + "d" * 25,
          "AKIA" + "A" * 16, "ASIA" + "B" * 16, "sk-" + "e" * 25, "xoxb-" + "1" * 12, "xoxp-" + "2" * 12,
          "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----")


def test_every_token_shape_is_found_past_the_fast_path() -> None:
    """Data without a token's literal piece skips the patterns (the host's cost of what a run
    leaves, docs/sandbox.md); every shape the patterns know still holds one of those pieces."""
    from cmx_core.results.secrets import TOKEN_NEEDLES, TOKEN_PATTERNS, may_hold_secret, redact_bytes

    assert all(core in needle for core, needles in TOKEN_NEEDLES for needle in needles)

    filler = b"plain log line, nothing secret here\n" * 10_000
    assert not may_hold_secret(filler, ()) and redact_bytes(filler, ()) is filler
    for token in TOKENS:
        assert any(pattern.search(token) for pattern in TOKEN_PATTERNS), token
        data = filler + f"key={token}\n".encode() + filler
        assert may_hold_secret(data, ())
        assert token.encode() not in redact_bytes(data, ()), token
    assert redact_bytes(filler + b"hunter2-value", ("hunter2-value",)).endswith(b"[REDACTED]")


def test_a_private_key_block_runs_from_its_begin_to_the_first_end_after_it() -> None:
    """Key blocks are found in one pass (#54: one lazy expression took 583 s over 1 MiB of
    BEGIN lines with no END); what counts as a block is what that expression matched."""
    from cmx_core.results.secrets import find_secrets, key_blocks, redact

    rsa = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"
    ec = "-----BEGIN EC PRIVATE KEY-----\nq\n-----END EC PRIVATE KEY-----"
    text = f"a {rsa} b {ec} c -----BEGIN PRIVATE KEY----- left open"
    assert redact(text) == f"a {REDACTED} b {REDACTED} c -----BEGIN PRIVATE KEY----- left open"
    assert find_secrets(text) == [rsa, ec]
    unended = "-----BEGIN PRIVATE KEY-----\n" * 20_000
    assert key_blocks(unended) == [] and redact(unended) == unended
    nested = f"-----BEGIN PRIVATE KEY-----\nx\n{rsa}"  # to the first END: both BEGINs in one block
    assert key_blocks(nested) == [(0, len(nested))] and redact(nested) == REDACTED


WORD_BOUNDARY_FORMS = (r"\bhf_[A-Za-z0-9]{20,}\b", r"\bgh[pousr]_[A-Za-z0-9]{20,}\b",
                       r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
                       r"\bsk-[A-Za-z0-9_-]{20,}\b", r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")
"""The token formats as first written, with ``\\b`` in front (checked at every position)."""


def test_the_literal_first_token_shapes_match_exactly_what_the_word_boundary_forms_did() -> None:
    import random

    from cmx_core.results.secrets import TOKEN_SHAPES

    pieces = ["hf_", "ghp_", "gho_", "github_pat_", "AKIA", "ASIA", "sk-", "xoxb-", "xoxs-", "a", "Z", "9", "_",
              "-", " ", "\n", "é", "ß", "k", "AAAA", "x1y2z3w4", "0123456789ABCDEF"]
    rng = random.Random(54)
    matched = set()
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        for shape, form in zip(TOKEN_SHAPES, WORD_BOUNDARY_FORMS, strict=True):
            wanted = [m.span() for m in re.finditer(form, text)]
            assert [m.span() for m in shape.finditer(text)] == wanted, (form, text)
            matched |= {form} if wanted else set()
    assert matched == set(WORD_BOUNDARY_FORMS)  # every shape met text it matches, not only text it does not
