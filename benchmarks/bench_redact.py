"""What a run's leftovers cost the host after the run: ``redact_tree`` (every file of the run
directory is scanned for secrets before the result is written, cmx_core/results/secrets.py)
over a directory a program filled, in host CPU seconds (#54: an agent that ran 0.97 s and
left 1 GiB made cmx spend 179 s here):

    .venv/bin/python benchmarks/bench_redact.py [--mib 1024] [--files 1024] [--kind KIND] [--json]

The directory holds ``--mib`` MiB in ``--files`` files of one kind: ``zeros`` (what ``dd
if=/dev/zero`` leaves: valid UTF-8), ``text`` (log lines), ``random`` (not UTF-8), or the
worst cases a hostile program can write: ``keys`` (private key BEGIN lines with no END) and
``prefixes`` (token prefixes, ``sk-sk-sk-sk-`` lines, each a candidate the patterns try). It is
written once into a temporary directory, then ``redact_tree`` runs over it with one secret
value that does not occur; the CPU seconds (``time.process_time``), wall seconds and MiB/s
are printed. To compare with another checkout, run this file with ``PYTHONPATH`` set to that
checkout's root.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import cmx_core
from cmx_core.results.secrets import redact_tree

LINE = b"step 0001234 loss=2.3456 lr=0.0005 samples/s=1234.5 mem=512MiB ok\n"
REPEATED = {"text": LINE, "keys": b"-----BEGIN PRIVATE KEY-----\n", "prefixes": b"sk-sk-sk-sk-\n"}


def fill(root: Path, mib: int, files: int, kind: str) -> None:
    size = (mib << 20) // files
    unit = REPEATED.get(kind)
    chunk = b"\0" * size if kind == "zeros" else (unit * (size // len(unit) + 1))[:size] if unit else None
    for index in range(files):
        (root / f"out-{index:05d}.bin").write_bytes(chunk if chunk is not None else os.urandom(size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=1024)
    parser.add_argument("--kind", choices=("zeros", "random", *REPEATED), default="zeros")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cmx-bench-redact-") as folder:
        root = Path(folder)
        fill(root, args.mib, args.files, args.kind)
        cpu, wall = time.process_time(), time.perf_counter()
        changed = redact_tree(root, ("a-secret-value-that-is-not-there",))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    # microseconds kept: a fast machine redacts a few MiB in under 5 ms, which two decimals show as 0
    figures = {"mib": args.mib, "files": args.files, "kind": args.kind, "cpu_s": round(cpu, 6),
               "wall_s": round(wall, 6), "mib_per_s": round(args.mib / wall, 1), "changed": len(changed),
               "cmx_core": str(Path(cmx_core.__file__).parent)}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"redact_tree over {args.mib} MiB in {args.files} files ({args.kind}): {cpu:.3g} s CPU, "
              f"{wall:.3g} s wall, {figures['mib_per_s']} MiB/s ({figures['cmx_core']})")


if __name__ == "__main__":
    main()
