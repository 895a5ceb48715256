"""Engine overhead, measured (issue 2's targets). Prints a table; ``--check`` exits 1 when a
target is missed.

    .venv/bin/python benchmarks/bench_engine.py [--repeat 15] [--check] [--scale-only]

* warm cached ``cmx run recipe --tags=detect,os`` (whole process, wall)   target <= 60 ms
  (replayed from its warm-run memo, as an identical second run is; the same run with
  ``CMX_NO_REPLAY=1``, i.e. plugins loaded and the plan resolved, is reported too)
* ``cmx --help`` (whole process, wall)                                    target <= 40 ms
* index check of 10,000 generated recipes, nothing changed (in-process)   target <= 50 ms
  and the cold parse of the same files (reported)
* resolve + plan of a generated 500-node graph (in-process)               target <= 100 ms
* resolve + plan of a 50-node chain inside a 10,000-recipe collection
  sharing the common tag ``gen`` (in-process)                           target <= 100 ms
* resolve + plan of a 500-dependency fan-out (one root, 500 leaves)       target <= 100 ms
* resolve + plan of 500 and 5,000-dependency fan-outs over 10,000 recipes that all carry the
  tag ``get`` (each dep ``{tags: [get, itemN]}``), and a one-dep plan in the same collection
  (in-process, reported): a dep's candidates come from its rarest tag, so the cost grows
  with the plan, not with the 10,000 recipes sharing ``get``. ``--write-shared DIR`` writes
  that collection and prints the two command lines of each whole-process comparison, to
  time alternately (A B A B, medians and the median of the pair ratios) with any timer,
  e.g. ``/usr/bin/time -f '%U %S %e'`` (the 500-dep plan must take <= 2x the one-dep plan)
* resolve + plan of a 10,000-node graph (in-process)                      target <= 1000 ms
* resolve + plan of a 5,000-deep chain (must plan at all: no RecursionError)
* growth: plan time of 100, 1,000 and 10,000-node graphs, and microseconds per node
* under the big-collection, fan-out and 10,000-node rows: the first plan of a new session
  (what one command pays: the recipes it reads are built from the index too), reported

Medians of repeated runs; everything happens in a private CMX_HOME. The engine and the
plugins are byte-compiled first, as ``pip install`` of a wheel does (an editable checkout
under PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module on every command).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CMX = [sys.executable, "-m", "cmx_core.cli.main"]


def compile_sources() -> None:
    """Write .pyc files for cmx-core and every installed cmx plugin's package."""
    import compileall
    import importlib

    names = ["cmx_core", "cmx_detect", "cmx_docker", "cmx_mlperf"]
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if module.__file__ is not None:  # a namespace package has no file to compile
            compileall.compile_dir(str(Path(module.__file__).parent), quiet=1)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def process(args: list[str], env: dict[str, str]) -> Callable[[], object]:
    exe = Path(sys.executable).with_name("cmx")
    cmd = [str(exe), *args] if exe.exists() else [*CMX, *args]
    return lambda: subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def generate_flat(directory: Path, count: int) -> None:
    for i in range(count):
        sub = directory / f"group{i // 500:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"r{i:05d}.yaml").write_text(
            f"name: gen-{i:05d}\nversion: '1.0'\ntags: [gen, g{i % 97}, n{i}]\nsummary: generated recipe {i}\n"
            "inputs:\n  size: {type: integer, default: 10, min: 1}\n"
            "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.size }}']}}\n"
        )


def generate_graph(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        deps = [j for j in (2 * i + 1, 2 * i + 2) if j < count]
        dep_text = "".join(f"  - {{tags: [node{j}], as: d{j}}}\n" for j in deps)
        (directory / f"n{i:04d}.yaml").write_text(
            f"name: node-{i:04d}\ntags: [graph, node{i}]\nsummary: graph node {i}\n"
            "variations:\n  small: {group: size, default: true}\n  big: {group: size}\n"
            + (f"deps:\n{dep_text}" if deps else "")
            + "steps:\n  - {uses: shell, with: {cmd: [echo, node]}}\n"
        )


def generate_chain(directory: Path, count: int, tags: str = "") -> None:
    """``chain-0`` depends on ``chain-1`` ... on ``chain-{count-1}``; ``tags`` adds shared tags."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        dep = f"deps:\n  - {{tags: [chain{i + 1}]}}\n" if i + 1 < count else ""
        (directory / f"c{i:05d}.yaml").write_text(
            f"name: chain-{i:05d}\ntags: [{tags}chain{i}]\nsummary: chain link {i}\n{dep}"
            "steps:\n  - {uses: shell, with: {cmd: [echo, link]}}\n")


def generate_fanout(directory: Path, count: int) -> None:
    """One root ``fan`` with ``count`` leaf deps ``leaf0`` ... (each its own recipe)."""
    directory.mkdir(parents=True, exist_ok=True)
    deps = "".join(f"  - {{tags: [leaf{i}], as: l{i}}}\n" for i in range(count))
    (directory / "fan.yaml").write_text(f"name: fan\ntags: [fan]\nsummary: fan-out root\ndeps:\n{deps}"
                                        "steps:\n  - {uses: shell, with: {cmd: [echo, fan]}}\n")
    for i in range(count):
        (directory / f"leaf{i:04d}.yaml").write_text(
            f"name: leaf-{i:04d}\ntags: [leaf, leaf{i}]\nsummary: leaf {i}\n"
            "steps:\n  - {uses: shell, with: {cmd: [echo, leaf]}}\n")


def generate_shared(directory: Path, count: int, fans: tuple[int, ...] = (1, 500, 5_000)) -> None:
    """``count`` recipes ``item-N`` all tagged ``get`` (and ``itemN``, a variation each), and
    roots ``fanK`` with K deps ``{tags: [get, itemN]}`` over them."""
    for i in range(count):
        sub = directory / f"items{i // 500:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"i{i:05d}.yaml").write_text(
            f"name: item-{i:05d}\ntags: [get, item, item{i}]\nsummary: shared-tag recipe {i}\n"
            "variations:\n  small: {group: size, default: true}\n  big: {group: size}\n"
            "steps:\n  - {uses: shell, with: {cmd: [echo, item]}}\n")
    for fan in fans:
        deps = "".join(f"  - {{tags: [get, item{i}], as: d{i}}}\n" for i in range(fan))
        (directory / f"fan{fan}.yaml").write_text(
            f"name: fan{fan}\ntags: [fan{fan}]\nsummary: {fan} deps sharing the tag get\ndeps:\n{deps}"
            "steps:\n  - {uses: shell, with: {cmd: [echo, fan]}}\n")


def plan_ms(directories: list[Path], tags: str, nodes: int, repeat: int) -> float:
    """The median time to resolve and plan ``tags`` in a session over ``directories``."""
    from cmx_core.run import engine

    session = engine.open_session(directories)
    plan = engine.plan_in(session, tags)
    assert len(plan.nodes) == nodes, (tags, len(plan.nodes))
    return median_ms(lambda: engine.plan_in(session, tags), repeat)


def first_plan_ms(directories: list[Path], tags: str, nodes: int, repeat: int) -> float:
    """The median time of what one command pays: open a session (the index is warm), build
    the recipes the plan reads and plan once, nothing reused from an earlier plan."""
    from cmx_core.run import engine

    def once() -> None:
        plan = engine.plan_in(engine.open_session(directories), tags)
        assert len(plan.nodes) == nodes, (tags, len(plan.nodes))

    once()  # the index is written
    return median_ms(once, repeat)


FIRST = "  first plan of a new session (one command)"


def scale_rows(root: Path, flat: Path, repeat: int) -> list[tuple[str, float, float | None]]:
    """Issue 17's resolver figures: a plan inside a big collection, a fan-out, big and deep graphs.
    The targets are for a plan in an open session; the first plan of a new session, which also
    builds every recipe it reads from the index, is reported under each."""
    rows: list[tuple[str, float, float | None]] = []
    generate_chain(root / "chain50", 50, tags="gen, ")
    rows.append(("50-node plan in a 10,000-recipe collection",
                 plan_ms([root / "chain50", flat], "gen,chain0", 50, repeat), 100.0))
    rows.append((FIRST, first_plan_ms([root / "chain50", flat], "gen,chain0", 50, 3), None))
    generate_fanout(root / "fan", 500)
    rows.append(("500-dependency fan-out", plan_ms([root / "fan"], "fan", 501, repeat), 100.0))
    rows.append((FIRST, first_plan_ms([root / "fan"], "fan", 501, 3), None))
    generate_shared(root / "shared", 10_000)
    for fan in (1, 500, 5_000):
        rows.append((f"{fan:,}-dep fan-out over 10,000 recipes tagged get",
                     plan_ms([root / "shared"], f"fan{fan}", fan + 1, max(3, repeat // (fan // 500 or 1))), None))
        rows.append((FIRST, first_plan_ms([root / "shared"], f"fan{fan}", fan + 1, 3), None))
    per_node = []
    for count in (100, 1_000, 10_000):
        generate_graph(root / f"graph{count}", count)
        value = plan_ms([root / f"graph{count}"], "graph,node0", count, max(3, repeat // (count // 100 or 1)))
        per_node.append((count, value))
        rows.append((f"{count:,}-node graph", value, 1000.0 if count == 10_000 else None))
    rows.append((FIRST, first_plan_ms([root / "graph10000"], "graph,node0", 10_000, 3), None))
    for count, value in per_node:  # in microseconds: a millisecond per node would be far off linear
        rows.append((f"  growth: us per node at {count:,} nodes", 1000 * value / count, None))
    generate_chain(root / "chain5000", 5_000)
    rows.append(("5,000-deep chain (plans, no RecursionError)",
                 plan_ms([root / "chain5000"], "chain0", 5_000, 3), None))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--scale-only", action="store_true", help="only the resolver-at-scale figures (issue 17)")
    parser.add_argument("--write-shared", metavar="DIR", type=Path,
                        help="write the shared-tag collection to DIR and print the command lines to time alternately")
    args = parser.parse_args()
    if args.write_shared:
        return write_shared(args.write_shared)
    rows: list[tuple[str, float, float | None]] = []
    compile_sources()
    with tempfile.TemporaryDirectory(prefix="cmx-bench-") as tmp:
        root = Path(tmp)
        os.environ["CMX_HOME"] = str(root / "home")
        if args.scale_only:
            generate_flat(root / "flat", 10_000)
            return report(rows + scale_rows(root, root / "flat", args.repeat), args.check)
        env = dict(os.environ)
        warm = process(["run", "recipe", "--tags=detect,os"], env)
        warm()  # fill the cache, the index and the fact cache
        warm()
        rows.append(("warm cached run detect,os (process)", median_ms(warm, args.repeat), 60.0))
        full = process(["run", "recipe", "--tags=detect,os"], {**env, "CMX_NO_REPLAY": "1"})
        rows.append(("  same, full path (CMX_NO_REPLAY=1)", median_ms(full, args.repeat), None))
        rows.append(("cmx --help (process)", median_ms(process(["--help"], env), args.repeat), 40.0))
        rows.append(("python -c pass (baseline)", median_ms(
            lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeat), None))

        from cmx_core.catalog.catalog import Source, load_catalog

        flat = root / "flat"
        generate_flat(flat, 10_000)
        sources = [Source("bench", flat)]
        start = time.perf_counter()
        cold = load_catalog(sources=sources)
        rows.append(("cold parse of 10,000 recipes (in-process)", (time.perf_counter() - start) * 1000, None))
        assert cold.stats["parsed"] == 10_000, cold.stats
        del cold  # a real command starts with an empty heap, not with 10,000 built recipes
        import gc

        gc.collect()
        rows.append(("index check of 10,000 unchanged recipes",
                     median_ms(lambda: load_catalog(sources=sources), args.repeat), 50.0))

        graph = root / "graph"
        generate_graph(graph, 500)
        from cmx_core.run import engine

        session = engine.open_session([graph])
        plan = engine.plan_in(session, "graph,node0")
        assert len(plan.nodes) == 500, len(plan.nodes)
        rows.append(("resolve + plan of a 500-node graph",
                     median_ms(lambda: engine.plan_in(session, "graph,node0"), args.repeat), 100.0))
        rows += scale_rows(root, flat, args.repeat)

    return report(rows, args.check)


def write_shared(directory: Path) -> int:
    """The shared-tag collection and the whole-process commands that compare its plans."""
    compile_sources()
    generate_shared(directory / "recipes", 10_000)
    home = directory / "home"
    exe = Path(sys.executable).with_name("cmx")
    cmx = str(exe) if exe.exists() else " ".join(CMX)
    plan = f"env CMX_HOME={home} {cmx} plan --recipes {directory / 'recipes'} --tags="
    subprocess.run(f"{plan}fan1".split(), check=True, stdout=subprocess.DEVNULL)  # the index is written
    for fan in ("fan500", "fan5000"):
        print(f"time alternately (A B A B, e.g. 5 pairs), whole processes, {fan} (A) vs fan1 (B):")
        print(f"  A: {plan}{fan}")
        print(f"  B: {plan}fan1")
    return 0


def report(rows: list[tuple[str, float, float | None]], check: bool) -> int:
    """Print the table; 1 when ``check`` and a target was missed."""
    missed = 0
    print(f"{'measurement':<46} {'median ms':>10} {'target':>8}")
    for name, value, target in rows:
        verdict = "" if target is None else ("ok" if value <= target else "MISSED")
        missed += verdict == "MISSED"
        print(f"{name:<46} {value:>10.1f} {'' if target is None else f'<= {target:g}':>8} {verdict}")
    return 1 if (check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
