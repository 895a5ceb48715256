"""Generator of cmx001 (Depot placement): ``gen.py SEED`` prints one input to stdout.

Written for cmx; the same seed always gives the same input (Python's Mersenne Twister).
"""

import random
import sys


def main() -> None:
    seed = int(sys.argv[1])
    rng = random.Random(seed)
    n = rng.randint(100, 400)
    k = rng.randint(5, 20)
    centres = [(rng.randint(0, 9999), rng.randint(0, 9999)) for _ in range(rng.randint(3, 12))]
    lines = [f"{n} {k}"]
    for _ in range(n):
        cx, cy = rng.choice(centres)
        x = min(9999, max(0, int(rng.gauss(cx, 900))))
        y = min(9999, max(0, int(rng.gauss(cy, 900))))
        lines.append(f"{x} {y} {rng.randint(1, 100)}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
