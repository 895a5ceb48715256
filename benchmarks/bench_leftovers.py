"""What a sandboxed program's leftovers cost the host, end to end (#54 item 3): a program in
the real bubblewrap sandbox writes ``--mib`` MiB in ``--files`` files into its work dir and
exits; the host then brings the work dir back (``Limits.keep_bytes``) and redacts it
(``redact_tree``, as a run does before it writes its result). Printed: the program's wall
seconds, and this process's CPU seconds for the run (supervision and bringing back) and for
the redaction, with ``keep_bytes`` None (everything comes back: before the cap) and at
``--keep-mib`` (the default cap):

    .venv/bin/python benchmarks/bench_leftovers.py [--mib 1024] [--files 1024] [--kind prefixes] [--json]

``--kind`` is ``prefixes`` (token prefixes, ``sk-sk-sk-`` lines: the text the redaction reads
slowest) or ``zeros``. The program's own CPU time is not counted (it is a child).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from cmx_core.api import Limits, SandboxSpec
from cmx_core.results.secrets import redact_tree
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.spec import KEEP_BYTES
from cmx_core.sandbox.workfs import tree_bytes

WRITER = """
import sys
mib, files, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
size = (mib << 20) // files
unit = b"sk-sk-sk-sk-\\n" if kind == "prefixes" else b"\\0"
chunk = (unit * (size // len(unit) + 1))[:size]
for index in range(files):
    with open(f"out-{index:05d}.bin", "wb") as out:
        out.write(chunk)
"""


def one(mib: int, files: int, kind: str, keep: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-leftovers-") as folder:
        work = Path(folder) / "work"
        work.mkdir(mode=0o755)
        limits = Limits(wall_s=600.0, work_bytes=(mib + 64) << 20, keep_bytes=keep, output_bytes=(mib + 1) << 20)
        spec = SandboxSpec(argv=["/usr/bin/python3", "-c", WRITER, str(mib), str(files), kind], work_dir=work,
                           limits=limits)
        cpu = time.process_time()
        result = BubblewrapSandbox().run(spec)
        run_cpu, cpu = time.process_time() - cpu, time.process_time()
        redact_tree(work, ("a-secret-value-that-is-not-there",))
        redact_cpu = time.process_time() - cpu
        if not result.ok:
            raise SystemExit(f"the writer did not run to the end: {result.verdict.value} ({result.reason})")
        kept = tree_bytes(work)
    return {"keep_mib": None if keep is None else keep >> 20, "program_wall_s": round(result.wall_s, 3),
            "host_run_cpu_s": round(run_cpu, 3), "host_redact_cpu_s": round(redact_cpu, 3),
            "host_cpu_s": round(run_cpu + redact_cpu, 3), "kept_mib": round(kept / (1 << 20), 1),
            "dropped_files": len(result.dropped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=1024)
    parser.add_argument("--kind", choices=("prefixes", "zeros"), default="prefixes")
    parser.add_argument("--keep-mib", type=int, default=KEEP_BYTES >> 20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [one(args.mib, args.files, args.kind, keep) for keep in (None, args.keep_mib << 20)]
    figures = {"mib": args.mib, "files": args.files, "kind": args.kind, "runs": rows}
    if args.json:
        print(json.dumps(figures))
        return
    print(f"a program leaves {args.mib} MiB in {args.files} files ({args.kind}):")
    for row in rows:  # two lines a row: each fits 80 columns
        keep = "everything back" if row["keep_mib"] is None else f"keep {row['keep_mib']} MiB"
        print(f"  {keep}: program {row['program_wall_s']} s; kept {row['kept_mib']} MiB, "
              f"{row['dropped_files']} files dropped")
        print(f"    host CPU {row['host_cpu_s']} s (run {row['host_run_cpu_s']}, "
              f"redaction {row['host_redact_cpu_s']})")


if __name__ == "__main__":
    main()
