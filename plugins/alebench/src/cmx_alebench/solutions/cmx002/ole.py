"""cmx002 test solution: prints about 38 MiB, past the 16 MiB output limit (OUTPUT_LIMIT_EXCEEDED)."""
import sys

chunk = "0\n" * 65536
for _ in range(300):
    sys.stdout.write(chunk)
