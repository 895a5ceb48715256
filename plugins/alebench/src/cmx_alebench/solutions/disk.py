"""cmx001 hostile: fills its work dir with 8 MiB files until a write fails, then makes empty
files, then answers as trivial.py does (the disk bound it hit must still decide the verdict)."""

import sys

try:
    for i in range(1024):
        with open(f"fill{i}", "wb") as out:
            out.write(b"x" * (8 << 20))
except OSError:
    pass
for i in range(2000):
    open(f"empty{i}", "w").close()
n, k = map(int, sys.stdin.readline().split())
sys.stdout.write("5000 5000\n" * k)
