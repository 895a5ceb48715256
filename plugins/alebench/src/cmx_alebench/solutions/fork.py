"""cmx001 hostile: forks until the process limit refuses one, cleans up, then answers as
trivial.py does (the limit it hit must still decide the verdict)."""

import os
import signal
import sys
import time

kids = []
try:
    for _ in range(500):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
n, k = map(int, sys.stdin.readline().split())
sys.stdout.write("5000 5000\n" * k)
