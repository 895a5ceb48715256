#!/usr/bin/env bash
# The whole test suite with a CPU hog beside it: HOGS busy processes (default: one per core)
# compete with the tests for the whole run, to prove that no test depends on the machine's
# speed (a LoadGen run a test expects VALID recalibrates and retries; nothing is timed).
#
#   bash scripts/test-under-load.sh [pytest args...]      # HOGS=4 bash scripts/test-under-load.sh
#
# Each hog is bounded (it exits by itself after HOG_MAX_S seconds) and stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
hogs="${HOGS:-$(nproc)}"
max_s="${HOG_MAX_S:-5400}"
pids=()
stop_hogs() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
for _ in $(seq 1 "$hogs"); do
  timeout "$max_s" python3 -c 'while True: pass' &
  pids+=("$!")
done
echo "scripts/test-under-load.sh: $hogs CPU hog(s) running (PIDs ${pids[*]}), at most ${max_s} s" >&2
bash scripts/test.sh "$@"
