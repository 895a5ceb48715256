"""Cost of result validation with suites: cold (empty validator cache: compile + metaschema
check), warm (a new process, cache filled) and per call, each in a fresh subprocess.

    python benchmarks/bench_validation.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from cmx_core.plugins.loader import load_registry
from cmx_core.results.examples import H100_FACTS, example_document, mlperf_part
from cmx_core.results.validate import validate_document
registry = load_registry()
doc = example_document(Path(sys.argv[1]), part=mlperf_part(), facts=H100_FACTS)
t1 = time.perf_counter()
suites = registry.suites                       # registration: the section schemas are checked
t2 = time.perf_counter()
validate_document(doc, suites=suites)          # first validation in this process
t3 = time.perf_counter()
n = 1000
for _ in range(n):
    validate_document(doc, suites=suites)
t4 = time.perf_counter()
print(json.dumps({"register_ms": (t2 - t1) * 1e3, "first_ms": (t3 - t2) * 1e3,
                  "per_call_us": (t4 - t3) / n * 1e6,
                  "heavy": sorted(m for m in ("jsonschema", "fastjsonschema") if m in sys.modules)}))
"""


def _child(home: str, run_dir: str) -> dict[str, float]:
    env = {**os.environ, "CMX_HOME": home, "CMX_LOAD_PLUGINS": "mlperf"}
    out = subprocess.run([sys.executable, "-c", CHILD, run_dir], env=env, capture_output=True, text=True,
                         check=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cold, warm = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as run_dir:
            cold.append(_child(home, run_dir))
            warm.append(_child(home, run_dir))
    for name, runs in (("cold", cold), ("warm", warm)):
        fields = ("register_ms", "first_ms", "per_call_us")
        medians = {f: round(statistics.median(r[f] for r in runs), 3) for f in fields}
        print(json.dumps({"case": name, **medians, "heavy_imports": runs[-1]["heavy"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
