"""cmx002 reference: a nearest-neighbour tour from lantern 0 (ACCEPTED)."""
import math
import sys

data = sys.stdin.read().split()
n = int(data[0])
pts = [(int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n)]
left = set(range(1, n))
order = [0]
while left:
    x, y = pts[order[-1]]
    nxt = min(left, key=lambda j: (math.hypot(pts[j][0] - x, pts[j][1] - y), j))
    left.remove(nxt)
    order.append(nxt)
print("\n".join(map(str, order)))
