"""The cache verifies content and can be moved: meta.json carries its own digest (a tampered
one is a miss with the reason), ``cmx cache verify`` re-hashes the declared outputs, and
paths inside an entry are stored relative to it, so a copied or moved cache still hits."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cmx_core
import cmx_core.api
from cmx_core import paths
from cmx_core.cache.store import ENTRY_REF, META, Cache, _changed_path

RECIPE = """
name: writer
tags: [writer]
summary: writes a file and returns its path
outputs: [file]
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo hello > out.txt; echo "file=$PWD/out.txt"'], parse: kv}
"""


@pytest.fixture
def cached(recipes: Any) -> tuple[Path, Path]:
    """A committed entry of ``writer``: (its recipes dir, its meta.json)."""
    recipes("writer", RECIPE)
    result = cmx_core.api.run("writer", recipes_dirs=[recipes.dir])
    assert result.status == "completed"
    (entry,) = Cache().entries()
    return recipes.dir, entry.path / META


def status(recipes_dir: Path) -> tuple[str, str]:
    root = cmx_core.api.plan("writer", recipes_dirs=[recipes_dir]).root
    return root.cache_status, root.cache_reason


def test_an_entry_stores_relative_paths_and_digests(cached: tuple[Path, Path]) -> None:
    recipes_dir, meta_file = cached
    meta = json.loads(meta_file.read_text())
    assert meta["outputs"]["file"] == f"{ENTRY_REF}/files/out.txt"
    assert set(meta["output_digests"]) == {"files/out.txt"} and len(meta["meta_digest"]) == 64
    assert str(meta_file.parent) not in meta_file.read_text()
    assert status(recipes_dir) == ("hit", "hit")
    (entry,) = Cache().entries()
    assert entry.outputs["file"] == str(meta_file.parent / "files" / "out.txt")  # resolved on read


def test_a_tampered_meta_is_a_miss_with_the_reason(cached: tuple[Path, Path], capsys: Any) -> None:
    recipes_dir, meta_file = cached
    meta = json.loads(meta_file.read_text())
    meta["outputs"]["file"] = "/etc/passwd"
    meta_file.write_text(json.dumps(meta))
    state, reason = status(recipes_dir)
    assert state == "miss" and reason == f"{META} does not match its digest (tampered or damaged)"
    assert "cmx cache rm" in capsys.readouterr().err
    assert cmx_core.api.run("writer", recipes_dirs=[recipes_dir]).status == "completed"  # recomputed, replaced
    assert status(recipes_dir) == ("hit", "hit")


def test_an_old_entry_without_digest_is_a_miss_with_the_reason(cached: tuple[Path, Path]) -> None:
    recipes_dir, meta_file = cached
    meta = json.loads(meta_file.read_text())
    del meta["format"], meta["meta_digest"]
    meta_file.write_text(json.dumps(meta))
    assert status(recipes_dir) == ("miss", "entry written by an older cmx (no metadata digest); it will be recomputed")


def test_verify_finds_a_changed_output(cached: tuple[Path, Path], cli: Callable[..., Any]) -> None:
    _, meta_file = cached
    key = meta_file.parent.name
    good = cli("cache", "verify", "--json")
    assert good.code == 0 and json.loads(good.out)["failed"] == 0
    (meta_file.parent / "files" / "out.txt").write_text("HELLO\n")  # same size: only the digest tells
    bad = cli("cache", "verify", key[:10])
    assert bad.code == 1
    assert "output files/out.txt changed (sha256" in bad.out and "1 checked, 1 failed" in bad.out
    assert f"cmx: error: cache entry {key}" in bad.err and f"remove it with: cmx cache rm {key}" in bad.err
    (meta_file.parent / "files" / "out.txt").unlink()
    assert "output files/out.txt is missing" in json.dumps(json.loads(cli("cache", "verify", "--json").out))


def test_a_copied_and_a_moved_cache_still_hit(cached: tuple[Path, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    recipes_dir, _ = cached
    old_root = paths.cache_dir()
    copy = tmp_path / "copied-cache"
    shutil.copytree(old_root, copy, copy_function=shutil.copy)  # new mtimes, as cp -r gives
    monkeypatch.setenv("CMX_CACHE_DIR", str(copy))
    assert status(recipes_dir) == ("hit", "hit")
    (entry,) = Cache().entries()
    assert entry.outputs["file"].startswith(str(copy))  # not into the old cache
    moved = tmp_path / "moved-cache"
    copy.rename(moved)
    monkeypatch.setenv("CMX_CACHE_DIR", str(moved))
    assert status(recipes_dir) == ("hit", "hit")
    assert Cache().verify(Cache().entries()[0]) == []


def test_an_in_place_edit_with_the_same_size_and_mtime_is_a_miss(cached: tuple[Path, Path], cli: Any) -> None:
    """Issue 28: the hit checks each output file's (size, mtime, ctime, inode); an edit that
    restores the size and mtime (``os.utime``) still changes the ctime, so the file is hashed,
    differs from its digest, and the step runs again."""
    import os

    recipes_dir, meta_file = cached
    out = meta_file.parent / "files" / "out.txt"
    assert cli("run", "recipe", "--recipes", recipes_dir, "--tags=writer").code == 0  # warm: a hit (and a memo)
    before = os.stat(out)
    out.write_text("HELLO\n")  # same size
    os.utime(out, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(out)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    cache_status, reason = status(recipes_dir)
    assert cache_status == "miss" and reason == "output files/out.txt changed in place " \
        "(its content no longer matches its digest)"
    assert cli("run", "recipe", "--recipes", recipes_dir, "--tags=writer").code == 0  # not replayed, not a hit
    (entry,) = Cache().entries()
    assert (entry.path / "files" / "out.txt").read_text() == "hello\n"  # the step ran again


def test_an_untouched_file_is_not_hashed_again_and_a_moved_one_once(cached: tuple[Path, Path],
                                                                    monkeypatch: Any) -> None:
    from cmx_core.cache import store

    recipes_dir, meta_file = cached
    hashed: list[Path] = []
    real = store._file_digest
    monkeypatch.setattr(store, "_file_digest", lambda p: hashed.append(p) or real(p))
    assert status(recipes_dir) == ("hit", "hit") and hashed == []  # a stat, no read
    out = meta_file.parent / "files" / "out.txt"
    out.chmod(0o644 if out.stat().st_mode & 0o777 != 0o644 else 0o600)  # a new ctime, same content
    assert status(recipes_dir) == ("hit", "hit") and hashed == [out]  # hashed once, matched
    assert status(recipes_dir) == ("hit", "hit") and hashed == [out]  # the stats were refreshed


POINTER = """
name: pointer
tags: [pointer]
summary: names a dataset file outside its entry (what a get- recipe for a local dataset returns)
inputs: {at: {type: string, required: true}}
outputs: [file]
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo "file=$1"', sh, "{{ inputs.at }}"], parse: kv}
"""


def test_a_file_outside_the_entry_edited_in_place_with_size_and_mtime_kept_is_a_miss(recipes: Any,
                                                                                    tmp_path: Path) -> None:
    recipes("pointer", POINTER)
    data = tmp_path / "data.txt"
    data.write_text("one")
    cmx_core.api.run("pointer", {"at": str(data)}, recipes_dirs=[recipes.dir])
    (entry,) = Cache().entries()
    assert len(json.loads((entry.path / META).read_text())["paths"][str(data)]) == 4
    assert cmx_core.api.plan("pointer", {"at": str(data)}, recipes_dirs=[recipes.dir]).root.cache_status == "hit"
    before = os.stat(data)
    data.write_text("two")
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    root = cmx_core.api.plan("pointer", {"at": str(data)}, recipes_dirs=[recipes.dir]).root
    assert (root.cache_status, root.cache_reason) == ("miss", f"recorded path changed: {data}")


def test_an_older_entry_with_only_size_and_mtime_of_a_path_still_hits(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("one")
    st = os.stat(data)
    assert _changed_path({str(data): [st.st_size, st.st_mtime_ns]}) is None
    assert _changed_path({str(data): [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]}) is None
    assert _changed_path({str(data): [st.st_size, st.st_mtime_ns, st.st_ctime_ns - 1, st.st_ino]}) == str(data)
