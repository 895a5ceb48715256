"""test solution: prints one depot too few (WRONG_ANSWER)."""
import sys

n, k = map(int, sys.stdin.readline().split())
sys.stdout.write("5000 5000\n" * (k - 1))
