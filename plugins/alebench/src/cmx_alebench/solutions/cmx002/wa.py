"""cmx002 test solution: visits lantern 0 twice (WRONG_ANSWER)."""
import sys

n = int(sys.stdin.readline())
print("\n".join(["0"] * n))
