"""cmx001 reference: weighted k-means from random starts until a 0.8 s time budget is spent.

Time-aware: how many restarts fit depends on the machine, so the score varies between runs
(within a range); the random generator is seeded from the clock on purpose.
"""

import math
import random
import sys
import time

BUDGET_S = 0.8
START = time.perf_counter()


Point = tuple[int, int, int]
Depot = tuple[int, int]


def cost(points: list[Point], depots: list[Depot]) -> float:
    return sum(d * min(math.hypot(x - a, y - b) for a, b in depots) for x, y, d in points)


def lloyd(points: list[Point], depots: list[Depot], rounds: int = 8) -> list[Depot]:
    for _ in range(rounds):
        sums = [[0.0, 0.0, 0.0] for _ in depots]
        for x, y, d in points:
            best = min(range(len(depots)), key=lambda j: (x - depots[j][0]) ** 2 + (y - depots[j][1]) ** 2)
            sums[best][0] += x * d
            sums[best][1] += y * d
            sums[best][2] += d
        depots = [(round(sx / w), round(sy / w)) if w else depots[j] for j, (sx, sy, w) in enumerate(sums)]
    return depots


def main() -> None:
    data = sys.stdin.read().split()
    n, k = int(data[0]), int(data[1])
    points = [(int(data[2 + 3 * i]), int(data[3 + 3 * i]), int(data[4 + 3 * i])) for i in range(n)]
    rng = random.Random(time.time_ns())
    best: list[Depot] | None = None
    best_cost = math.inf
    while best is None or time.perf_counter() - START < BUDGET_S:
        start = [(x, y) for x, y, _ in rng.sample(points, k)]
        depots = lloyd(points, start)
        c = cost(points, depots)
        if c < best_cost:
            best, best_cost = depots, c
    assert best is not None
    sys.stdout.write("".join(f"{min(9999, max(0, a))} {min(9999, max(0, b))}\n" for a, b in best))


main()
