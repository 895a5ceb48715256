"""The recipe index (``cmx_core.catalog.catalog``): a check re-parses exactly the files that changed
(modified in place, added, removed, in a replaced or just-modified directory), lists only the
directories that changed, leaves the index file alone when nothing did, and rebuilds a
corrupt or truncated index with a one-line warning."""

from __future__ import annotations

import marshal
import os
import shutil
from pathlib import Path

import pytest

from cmx_core.catalog import catalog as catalog_module
from cmx_core.catalog import index as catalog_index_module
from cmx_core.catalog.catalog import INDEX_FORMAT, Index, Source, load_catalog
from cmx_core.errors import CmxError

OLD_NS = 1_600_000_000 * 10**9  # 2020: a directory this old is trusted by its mtime (not racy)
GROUPS, PER_GROUP = 3, 20


def _text(i: int, summary: str | None = None) -> str:
    return f"name: r{i:03d}\ntags: [all, g{i // PER_GROUP}, n{i}]\nsummary: {summary or f'recipe {i:03d}'}\n"


def _age(*directories: Path) -> None:
    for directory in directories:
        os.utime(directory, ns=(OLD_NS, OLD_NS))


@pytest.fixture(params=[True, False], ids=["dir_fd", "paths"])
def tree(request: pytest.FixtureRequest, tmp_path: Path, cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GROUPS directories of PER_GROUP recipes, indexed once, with old directory mtimes.
    Run with stat relative to the open directory and with plain paths (no dir_fd, as on
    Windows)."""
    monkeypatch.setattr(catalog_index_module, "_DIR_FD", request.param and catalog_index_module._DIR_FD)
    root = tmp_path / "tree"
    for i in range(GROUPS * PER_GROUP):
        group = root / f"g{i // PER_GROUP}"
        group.mkdir(parents=True, exist_ok=True)
        (group / f"r{i:03d}.yaml").write_text(_text(i))
    _age(root, *root.iterdir())
    first = _load(root)
    assert first.stats == {"parsed": GROUPS * PER_GROUP, "files": GROUPS * PER_GROUP} and not first.errors
    return root


def _load(root: Path) -> catalog_module.Catalog:
    return load_catalog(sources=[Source("test", root)])


def _index_file(cmx_home: Path) -> Path:
    return cmx_home / "cache" / "index" / f"recipes.v{INDEX_FORMAT}"


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories that os.scandir lists from now on."""
    seen: list[str] = []
    real = os.scandir

    def scandir(path: str) -> object:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return seen


def test_an_unchanged_check_lists_nothing_parses_nothing_and_keeps_the_index_file(tree, cmx_home, listings) -> None:
    before = _index_file(cmx_home).stat()
    again = _load(tree)
    assert again.stats == {"parsed": 0, "files": GROUPS * PER_GROUP} and not again.errors
    assert listings == []
    after = _index_file(cmx_home).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(again.listed) == [f"r{i:03d}" for i in range(GROUPS * PER_GROUP)]
    assert [r.name for r in again.with_tag("g1")] == [f"r{i:03d}" for i in range(PER_GROUP, 2 * PER_GROUP)]
    assert [r.name for r in again.with_tag("n1")] == ["r001"]  # not n10..n19
    assert again.get("r007").summary == "recipe 007" and again.get("r007").digest


def test_an_in_place_modification_of_one_file_among_many_is_noticed(tree, listings) -> None:
    changed = tree / "g1" / "r025.yaml"
    text = _text(25, "CHANGED 025").replace("n25]", "n25, new]")
    with open(changed, "r+", encoding="utf-8") as fh:  # same inode: the directory does not change
        fh.truncate(0)
        fh.write(text)
    os.utime(changed, ns=(OLD_NS + 5 * 10**9, OLD_NS + 5 * 10**9))
    assert (tree / "g1").stat().st_mtime_ns == OLD_NS
    catalog = _load(tree)
    assert catalog.stats == {"parsed": 1, "files": GROUPS * PER_GROUP}
    assert catalog.get("r025").summary == "CHANGED 025"
    assert [r.name for r in catalog.with_tag("new")] == ["r025"]
    assert catalog.get("r024").summary == "recipe 024"
    assert listings == [str(tree / "g1")]
    assert _load(tree).stats["parsed"] == 0


def test_a_same_size_modification_is_noticed_by_its_mtime(tree) -> None:
    changed = tree / "g0" / "r003.yaml"
    changed.write_text(_text(3, "recipe XYZ"))
    assert changed.stat().st_size == len(_text(3))
    os.utime(changed, ns=(OLD_NS, OLD_NS))
    _age(tree / "g0")
    catalog = _load(tree)
    assert catalog.stats["parsed"] == 1 and catalog.get("r003").summary == "recipe XYZ"


def test_an_added_file_and_an_added_directory_are_noticed(tree, listings) -> None:
    (tree / "g2" / "extra.yaml").write_text("name: extra\ntags: [extra]\nsummary: added\n")
    catalog = _load(tree)
    assert catalog.stats == {"parsed": 1, "files": GROUPS * PER_GROUP + 1}
    assert catalog.get("extra").summary == "added"
    assert listings == [str(tree / "g2")]
    (tree / "g0" / "deeper").mkdir()
    (tree / "g0" / "deeper" / "deep.yml").write_text("name: deep\ntags: [deep]\nsummary: deeper\n")
    catalog = _load(tree)
    assert catalog.stats["parsed"] == 1 and [r.name for r in catalog.with_tag("deep")] == ["deep"]


def test_a_removed_file_and_a_removed_directory_are_noticed(tree) -> None:
    (tree / "g1" / "r030.yaml").unlink()
    catalog = _load(tree)
    assert catalog.stats == {"parsed": 0, "files": GROUPS * PER_GROUP - 1} and not catalog.errors
    assert catalog.get("r030") is None and "r030" not in catalog.listed
    assert [r.name for r in catalog.with_tag("n30")] == []
    shutil.rmtree(tree / "g2")
    catalog = _load(tree)
    assert catalog.stats == {"parsed": 0, "files": 2 * PER_GROUP - 1}
    assert catalog.get("r045") is None and catalog.get("r005") is not None


def test_a_replaced_directory_with_the_same_mtime_is_noticed(tree) -> None:
    """A copy (file mtimes preserved) with one more file, swapped in with the old directory
    mtimes: only the directory's inode tells it apart."""
    shutil.copytree(tree / "g0", tree.parent / "copy")
    (tree.parent / "copy" / "other.yaml").write_text("name: other\ntags: [other]\nsummary: replaced\n")
    (tree / "g0").rename(tree.parent / "old-g0")
    (tree.parent / "copy").rename(tree / "g0")
    _age(tree, tree / "g0")
    catalog = _load(tree)
    assert catalog.get("other") is not None and catalog.get("r000").summary == "recipe 000"
    assert catalog.stats == {"parsed": 1, "files": GROUPS * PER_GROUP + 1}


@pytest.mark.parametrize("mtime, now", [
    (OLD_NS + 123_456_789, OLD_NS + 173_456_789),   # sub-second mtimes: 50 ms before the check
    (OLD_NS, OLD_NS + 1_500_000_000),               # whole-second mtimes (FAT, HFS+): 1.5 s before
], ids=["fine", "whole-seconds"])
def test_a_change_in_the_same_clock_tick_as_the_last_check_is_noticed(
        tmp_path, cmx_home, monkeypatch, mtime, now) -> None:
    """A directory modified just before a check is listed again the next time, so a file
    added afterwards is found although the directory's mtime did not move."""
    monkeypatch.setattr(catalog_index_module, "_clock", lambda: now)
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "a.yaml").write_text("name: a\ntags: [a]\nsummary: a\n")
    os.utime(root, ns=(mtime, mtime))
    assert _load(root).stats["parsed"] == 1
    (root / "b.yaml").write_text("name: b\ntags: [b]\nsummary: b\n")
    os.utime(root, ns=(mtime, mtime))  # as if in the same tick as the first check
    catalog = _load(root)
    assert catalog.get("b") is not None and catalog.stats == {"parsed": 1, "files": 2}


def test_a_dangling_link_is_reported_on_every_check_without_rewriting_the_index(tree, cmx_home) -> None:
    os.symlink("nowhere.yaml", tree / "g1" / "broken.yaml")
    first = _load(tree)
    assert "cannot read" in first.errors[str(tree / "g1" / "broken.yaml")]
    _age(tree / "g1")
    _load(tree)  # now with the directory's (old) mtime recorded
    before = _index_file(cmx_home).stat()
    again = _load(tree)
    assert list(again.errors) == [str(tree / "g1" / "broken.yaml")] and again.stats["parsed"] == 0
    assert len(again.listed) == GROUPS * PER_GROUP
    after = _index_file(cmx_home).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def _truncate_data(raw: bytes) -> bytes:
    return raw[:-10]


def _truncate_table(raw: bytes) -> bytes:
    return raw[:40]


def _bad_record(raw: bytes) -> bytes:
    head = marshal.dumps({"format": INDEX_FORMAT, "region": 0, "dirs": {"/x": (None, ("a.yaml",), ())}})
    return b"CMXI" + len(head).to_bytes(8, "little") + head


def _previous_record_shape(raw: bytes) -> bytes:
    """Format 6's records (no variation names column) under the current format number."""
    size = int.from_bytes(raw[4:12], "little")
    table = marshal.loads(raw[12:12 + size])
    table["dirs"] = {d: rec[:8] + rec[9:] for d, rec in table["dirs"].items()}
    head = marshal.dumps(table)
    return b"CMXI" + len(head).to_bytes(8, "little") + head + raw[12 + size:]


def _older_format(raw: bytes) -> bytes:
    head = marshal.dumps({"format": 4, "files": {}})
    return b"CMXI" + len(head).to_bytes(8, "little") + head


@pytest.mark.parametrize("damage", [_truncate_data, _truncate_table, _bad_record, _previous_record_shape,
                                    _older_format])
def test_a_corrupt_or_truncated_index_is_rebuilt_with_a_warning(tree, cmx_home, capsys, damage) -> None:
    index_file = _index_file(cmx_home)
    capsys.readouterr()
    index_file.write_bytes(damage(index_file.read_bytes()))
    catalog = _load(tree)
    err = capsys.readouterr().err
    assert err == f"cmx: warning: recipe index {index_file} is corrupt; rebuilding it\n"
    assert catalog.stats == {"parsed": GROUPS * PER_GROUP, "files": GROUPS * PER_GROUP}
    assert catalog.get("r012").summary == "recipe 012"
    assert Index(index_file).dirs and _load(tree).stats["parsed"] == 0
    assert capsys.readouterr().err == ""


def test_damaged_recipe_data_is_an_error_and_the_index_is_dropped(tree, cmx_home) -> None:
    index_file = _index_file(cmx_home)
    raw = index_file.read_bytes()
    start = 12 + int.from_bytes(raw[4:12], "little")
    index_file.write_bytes(raw[:start] + b"\x00" * (len(raw) - start))  # same length, data zeroed
    catalog = _load(tree)
    with pytest.raises(CmxError, match=r"recipe index .* is corrupt .*; it was removed, run the command again"):
        catalog.get("r001")
    assert not index_file.exists()
    assert _load(tree).get("r001").summary == "recipe 001"


def test_shadowing_and_tags_across_sources(tmp_path, cmx_home) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    for directory in (high, low):
        directory.mkdir()
    (high / "x.yaml").write_text("name: x\ntags: [t, high]\nsummary: high x\n")
    (low / "x.yaml").write_text("name: x\ntags: [t, low]\nsummary: low x\n")
    (low / "y.yaml").write_text("name: y\ntags: [t]\nsummary: low y\n")
    for _ in range(2):  # parsed, then from the index
        catalog = load_catalog(sources=[Source("--recipes", high), Source("core", low)])
        assert [(r.name, r.source, r.summary) for r in catalog.with_tag("t")] == [
            ("x", "--recipes", "high x"), ("y", "core", "low y")]
        assert catalog.with_tag("low") == [] and [r.name for r in catalog.with_tag("high")] == ["x"]
        assert [(i.source, i.path) for i in catalog.shadowed_listed["x"]] == [("core", str(low / "x.yaml"))]
        assert list(catalog.listed) == ["x", "y"] and catalog.listed["x"].tags == ("t", "high")


def test_plugin_recipe_paths_are_handed_in_not_fetched(tmp_path, monkeypatch) -> None:
    """The catalog is given the plugins' recipe directories; it never asks the registry."""
    import cmx_core.plugins.loader

    def no_registry(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_catalog asked the plugin registry")

    monkeypatch.setattr(cmx_core.plugins.loader, "get_registry", no_registry)
    plugin_dir = tmp_path / "plugin-recipes"
    plugin_dir.mkdir()
    (plugin_dir / "p.yaml").write_text("name: from-plugin\ntags: [p]\nsummary: x\n")
    catalog = load_catalog(plugin_paths=[("cmx-example", plugin_dir)])
    assert catalog.get("from-plugin").source == "plugin:cmx-example"
    assert catalog.get("demo-sort") is not None  # the core collection is still there


def test_a_fact_nobody_provides_is_one_line_without_the_plugin_registry(monkeypatch) -> None:
    import cmx_core.plugins.loader
    from cmx_core.errors import ResolveError
    from cmx_core.facts.store import FactStore

    monkeypatch.setattr(cmx_core.plugins.loader, "get_registry", lambda *a, **k: pytest.fail("asked the registry"))
    with pytest.raises(ResolveError, match="no loaded plugin provides fact 'nope'"):
        FactStore({}).get("nope")


def test_the_index_lists_each_recipes_variation_names_and_keeps_them_current(tmp_path, cmx_home) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    recipe = directory / "v.yaml"
    recipe.write_text("name: v\ntags: [v]\nsummary: v\nvariations:\n  fast: {}\n  bs.#: {}\n  bert-99.9: {}\n")
    (directory / "plain.yaml").write_text("name: plain\ntags: [v]\nsummary: p\n")
    _age(directory, recipe, directory / "plain.yaml")
    for _ in range(2):  # parsed, then from the index
        catalog = load_catalog(sources=[Source("test", directory)])
        assert catalog.listed["v"].variations == ("fast", "bs.#", "bert-99.9")
        assert catalog.listed["plain"].variations == ()
        assert tuple(catalog.get("v").variations) == catalog.listed["v"].variations
    recipe.write_text("name: v\ntags: [v]\nsummary: v\nvariations:\n  slow: {}\n")
    (directory / "new.yaml").write_text("name: new\ntags: [n]\nsummary: n\nvariations:\n  x: {}\n")
    _age(directory, recipe, directory / "new.yaml")
    catalog = load_catalog(sources=[Source("test", directory)])
    assert catalog.stats["parsed"] == 2
    assert [(n, item.variations) for n, item in sorted(catalog.listed.items())] == [
        ("new", ("x",)), ("plain", ()), ("v", ("slow",))]
