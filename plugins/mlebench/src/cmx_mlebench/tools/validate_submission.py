#!/usr/bin/env python3
"""validate_submission [FILE]: is FILE (default /home/submission/submission.csv) in the format
of /home/data/sample_submission.csv? Prints "valid" (exit 0) or "invalid: WHY" (exit 1).

It reads only the public sample submission: it never sees the answers and never gives a
score, as MLE-bench's grading server answers only valid or invalid. Standard library only.
"""

from __future__ import annotations

import csv
import os
import sys

SAMPLE = "/home/data/sample_submission.csv"
DEFAULT = "/home/submission/submission.csv"
MAX_BYTES = 256 << 20


def rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def problem(path: str) -> str | None:
    if os.path.islink(path):
        return "the submission is a symbolic link; write a regular file"
    if not os.path.isfile(path):
        return f"no file at {path}"
    if not path.endswith(".csv"):
        return "the submission must be a .csv file"
    if os.path.getsize(path) > MAX_BYTES:
        return f"the submission is over {MAX_BYTES} bytes"
    try:
        got = rows(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return f"not a readable CSV ({exc})"
    want = rows(SAMPLE)
    if not got or got[0] != want[0]:
        return f"the header must be {','.join(want[0])}"
    if len(got) != len(want):
        return f"{len(got) - 1} rows, expected {len(want) - 1}"
    if sorted(r[0] for r in got[1:] if r) != sorted(r[0] for r in want[1:] if r):
        return f"the {want[0][0]} column must hold the ids of the sample submission"
    if any(len(r) != len(want[0]) for r in got[1:]):
        return f"every row needs {len(want[0])} fields"
    return None


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    why = problem(path)
    print("valid" if why is None else f"invalid: {why}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
