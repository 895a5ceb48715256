"""test solution: prints 32 MiB, past the 16 MiB output limit (OUTPUT_LIMIT_EXCEEDED)."""
import sys

chunk = "5000 5000\n" * 100000
for _ in range(34):
    sys.stdout.write(chunk)
