"""Tester of cmx001 (Depot placement): ``tester.py INPUT OUTPUT``.

Prints ``Score = N`` as its last stderr line, or a ``wrong answer: ...`` line when the
output breaks the format. Score = round(10^6 * W / (W + C / 100)) where W is the total
demand and C the demand-weighted Euclidean distance of every customer to its nearest depot.
"""

import math
import sys


def wrong(message: str) -> None:
    print(f"wrong answer: {message}", file=sys.stderr)
    sys.exit(1)


def read_input(path: str) -> tuple[int, list[tuple[int, int, int]]]:
    with open(path) as handle:
        tokens = handle.read().split()
    n, k = int(tokens[0]), int(tokens[1])
    values = list(map(int, tokens[2:2 + 3 * n]))
    return k, [(values[3 * i], values[3 * i + 1], values[3 * i + 2]) for i in range(n)]


def read_output(path: str, k: int) -> list[tuple[int, int]]:
    with open(path, errors="replace") as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    if len(lines) != k:
        wrong(f"expected {k} depot lines, got {len(lines)}")
    depots = []
    for number, line in enumerate(lines, 1):
        parts = line.split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
            wrong(f"line {number} is not two integers: {line[:50]!r}")
        x, y = int(parts[0]), int(parts[1])
        if not (0 <= x <= 9999 and 0 <= y <= 9999):
            wrong(f"line {number}: depot ({x}, {y}) is outside [0, 9999]")
        depots.append((x, y))
    return depots


def main() -> None:
    k, customers = read_input(sys.argv[1])
    depots = read_output(sys.argv[2], k)
    total = sum(d for _, _, d in customers)
    cost = sum(d * min(math.hypot(x - a, y - b) for a, b in depots) for x, y, d in customers)
    score = math.floor(1e6 * total / (total + cost / 100) + 0.5)
    print(f"Score = {score}", file=sys.stderr)


if __name__ == "__main__":
    main()
