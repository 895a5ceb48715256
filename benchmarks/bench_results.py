"""Warm-path cost of the results layer in a fresh process: import, build, validate, write, index.

Usage: python bench_results.py [N]   (prints medians over N fresh processes, in ms)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import time, sys, json
t = time.perf_counter
# what the engine has imported anyway before it writes a result
import cmx_core.providers.types, cmx_core.errors, json, hashlib, pathlib, datetime, re
from pathlib import Path
db, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
a = t()
import cmx_core.results
from cmx_core.results.document import build_document
from cmx_core.results.writer import write_result
from cmx_core.results.validate import validate_document
from cmx_core.results.store import ResultStore
b = t()
from cmx_core.results.examples import example_record, mlperf_part, H100_FACTS
record = example_record(run_dir, run_id="r" + sys.argv[3], part=mlperf_part(), facts=H100_FACTS)
c = t()
doc = build_document(record)
d = t()
validate_document(doc)
e = t()
path = write_result(run_dir, doc, suites=None)
f = t()
ResultStore(db).index(doc, path)
g = t()
print(json.dumps({"import": b - a, "build": d - c, "validate": e - d, "write(incl. validate)": f - e,
                  "index(incl. validate)": g - f,
                  "total import+build+write+index": (b - a) + (d - c) + (f - e) + (g - f)}))
'''

def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        samples = []
        for i in range(n + 1):
            out = subprocess.run([sys.executable, "-c", CHILD, f"{tmp}/results.sqlite", f"{tmp}/run{i}", str(i)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            if i:  # the first run compiles .pyc files and creates the database
                samples.append(json.loads(out))
    for key in samples[0]:
        print(f"{key:32s} {statistics.median(s[key] for s in samples) * 1e3:7.2f} ms")

if __name__ == "__main__":
    main()
