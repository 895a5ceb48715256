"""cmx001 reference: every depot at the grid's centre (deterministic)."""

import sys

n, k = map(int, sys.stdin.readline().split())
sys.stdout.write("5000 5000\n" * k)
