"""cmx002 test solution: touches 512 MiB, twice the 256 MiB limit (MEMORY_LIMIT_EXCEEDED)."""
block = bytearray(512 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
