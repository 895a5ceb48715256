"""A dep's ``cached_alternatives`` (docs/recipes.md, "Selecting recipes and variations"): the
recipe of an alternative that is in the cache is taken before the one its tags select, as CM
takes a cached script where several match; with none cached, the tags decide."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMPILERS = {
    "llvm": """
        name: llvm
        tags: [compiler, llvm]
        summary: the compiler the tags select
        outputs: [name]
        steps:
          - {uses: shell, with: {cmd: [sh, -c, 'echo name=llvm'], parse: kv}}
    """,
    "gcc": """
        name: gcc
        tags: [compiler, gcc]
        summary: the compiler taken when it is in the cache
        outputs: [name]
        steps:
          - {uses: shell, with: {cmd: [sh, -c, 'echo name=gcc'], parse: kv}}
    """,
    "flags": """
        name: flags
        tags: [flags]
        summary: uses a compiler
        cache: false
        deps:
          - {tags: [compiler, llvm], as: compiler, cached_alternatives: [[compiler, gcc], [compiler, icc]]}
        outputs: [used]
        steps:
          - {uses: shell, with: {cmd: [sh, -c, 'echo used={{ deps.compiler.name }}'], parse: kv}}
    """,
}


def _explained(cli: Callable[..., Any], directory: Path) -> tuple[str, str]:
    """The recipe the ``compiler`` dep resolved to and the line saying why."""
    done = cli("explain", "--tags=flags", "--recipes", str(directory), "--json")
    assert done.code == 0, done.err
    top = next(d for d in json.loads(done.out)["decisions"] if d["query"] == ["flags"])
    [chosen] = top["chosen"]
    assert chosen["dep"] == "compiler"
    node = next(d["node"] for d in json.loads(done.out)["decisions"] if d["chain"] == ["flags"])
    return node, chosen["why"]


def test_a_cached_alternative_is_taken_before_the_tags_choice(cli: Callable[..., Any],
                                                              recipes: Callable[[str, str], Path]) -> None:
    for name, text in COMPILERS.items():
        recipes(name, text)
    directory = recipes.dir  # type: ignore[attr-defined]
    node, why = _explained(cli, directory)
    assert node == "llvm" and "none of them in the cache" in why and "not gcc, compiler,icc (no one recipe))" in why

    assert cli("run", "--tags=compiler,gcc", "--recipes", str(directory), "--json").code == 0  # gcc cached
    node, why = _explained(cli, directory)
    assert node == "gcc", why
    assert "gcc is in the cache and llvm is not" in why
    done = cli("run", "--tags=flags", "--recipes", str(directory), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["outputs"]["used"] == "gcc"
    text = cli("explain", "--tags=flags", "--recipes", str(directory))
    assert "dep compiler: tags compiler,gcc: gcc is in the cache" in text.out

    assert cli("run", "--tags=compiler,llvm", "--recipes", str(directory), "--json").code == 0  # both cached
    node, why = _explained(cli, directory)
    assert node == "llvm" and "(in the cache; not gcc" in why  # the tags' own choice comes first

    for name in ("llvm", "gcc"):
        assert cli("cache", "rm", "--recipe", name).code == 0
    node, _ = _explained(cli, directory)
    assert node == "llvm"


def test_cached_alternatives_that_are_not_tag_lists_are_refused_with_the_key(
        cli: Callable[..., Any], recipes: Callable[[str, str], Path]) -> None:
    recipes("bad", """
        name: bad
        tags: [bad]
        summary: a dep whose alternatives are not lists of tags
        deps:
          - {tags: [compiler], cached_alternatives: 7}
    """)
    done = cli("plan", "--tags=bad", "--recipes", str(recipes.dir), "--strict")  # type: ignore[attr-defined]
    assert done.code == 2
    assert len(done.err_lines) == 1 and "cached_alternatives" in done.err and "bad.yaml" in done.err
    assert "Traceback" not in done.err


def test_a_lock_replays_the_alternative_it_ran_whatever_the_cache_holds_now(
        cli: Callable[..., Any], recipes: Callable[[str, str], Path], cmx_home: Path) -> None:
    """``cmx run --lock`` takes the dep the lock holds: gcc, cached when the run was made and
    gone from the cache since, is taken again (not llvm, which would be drift)."""
    for name, text in COMPILERS.items():
        recipes(name, text)
    directory = recipes.dir  # type: ignore[attr-defined]
    assert cli("run", "--tags=compiler,gcc", "--recipes", str(directory), "--json").code == 0
    assert json.loads(cli("run", "--tags=flags", "--recipes", str(directory), "--json").out)["outputs"]["used"] == "gcc"
    lock = next(cmx_home.glob("data/runs/*-flags-*/lock.json"))
    assert cli("cache", "rm", "--recipe", "gcc").code == 0
    assert _explained(cli, directory)[0] == "llvm"  # a new plan takes the tags' own choice
    replayed = cli("run", "--lock", str(lock), "--json")
    assert replayed.code == 0, replayed.err
    assert json.loads(replayed.out)["outputs"]["used"] == "gcc"


def test_an_alternative_is_looked_up_with_the_deps_version_range(cli: Callable[..., Any],
                                                                  recipes: Callable[[str, str], Path]) -> None:
    """Two gcc recipes match ``compiler,gcc``; the dep's ``version: '>=12'`` picks gcc-12, as
    for the dep itself, so the cached gcc-12 is taken rather than passed over as ambiguous."""
    for name, version in (("llvm", "15"), ("gcc-11", "11"), ("gcc-12", "12")):
        recipes(name, f"""
            name: {name}
            version: "{version}"
            tags: [{', '.join(dict.fromkeys(['compiler', name.split('-')[0], name]))}]
            summary: a compiler
            outputs: [name]
            steps:
              - {{uses: shell, with: {{cmd: [sh, -c, 'echo name={name}'], parse: kv}}}}
        """)
    recipes("flags", COMPILERS["flags"].replace("as: compiler,", "as: compiler, version: '>=12',"))
    directory = recipes.dir  # type: ignore[attr-defined]
    assert cli("run", "--tags=gcc-12", "--recipes", str(directory), "--json").code == 0
    node, why = _explained(cli, directory)
    assert node == "gcc-12", why
