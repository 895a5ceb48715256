#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs into .venv, starts the
# services the tests need (a private Docker engine; it needs root for apt-get and dockerd),
# runs ruff, mypy and lint-imports, then pytest over cmx-core and every plugin with a private,
# empty TMPDIR and HOME (as on a fresh machine), and stops what it started by PID.
#
#   bash scripts/test.sh [pytest args...]      # every test directory (what .ci/run calls)
#   bash scripts/test.sh PATH... [pytest args]  # only the given test paths (an existing file or
#                                               # directory, optionally with ::node); ruff and mypy still run
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
# checked before anything is installed or started, so a typo costs a second, not the install
workers=${CMX_TEST_WORKERS:-4}
case "$workers" in
  ''|*[!0-9]*) echo "scripts/test.sh: CMX_TEST_WORKERS is a whole number (0: none), not '$workers'" >&2
               exit 2 ;;
esac

W=$(mktemp -d "${TMPDIR:-/tmp}/cmx-test.XXXXXX")
# Slurm's munged runs as the munge user, who must reach its directory: not under $W (0700)
SLURM_W=$(mktemp -d "${TMPDIR:-/tmp}/cmx-slurm.XXXXXX")
# shellcheck source=scripts/services/docker.sh
source scripts/services/docker.sh
# shellcheck source=scripts/services/slurm.sh
source scripts/services/slurm.sh
# shellcheck source=scripts/fresh-env.sh
source scripts/fresh-env.sh
cleanup() {
  cmx_slurm_stop || true
  cmx_docker_stop || true
  rm -rf "$W" "$SLURM_W" ${CMX_FRESH:+"$CMX_FRESH"}
}
trap cleanup EXIT

bash scripts/install.sh --test

# Static checks first, so a lint or type error fails in seconds: ruff over the whole tree, then
# mypy --strict over cmx-core, the plugins' src, the example and the benchmarks (files and
# settings in pyproject.toml; cache in .mypy_cache/). mypy runs as the oldest supported Python
# (3.10, from the config: catches 3.11-only stdlib use) and as the one .venv runs (libraries such
# as Pillow type fully only there). Any finding fails the script.
echo "scripts/test.sh: ruff check" >&2
.venv/bin/ruff check .
# The two mypy runs go side by side (a minute each from a cold cache; mypy keeps one cache per
# Python version, so they do not collide) and each one's findings are printed after it.
venv_py=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
versions=(3.10)
[ "$venv_py" = "3.10" ] || versions+=("$venv_py")
echo "scripts/test.sh: mypy (Python ${versions[*]})" >&2
mypy_pids=()
for version in "${versions[@]}"; do
  .venv/bin/mypy --python-version "$version" > "$W/mypy-$version.txt" 2>&1 &
  mypy_pids+=($!)
done
mypy_failed=0
for i in "${!versions[@]}"; do
  wait "${mypy_pids[$i]}" || mypy_failed=1
  echo "mypy (Python ${versions[$i]}): $(tail -n 1 "$W/mypy-${versions[$i]}.txt")" >&2
done
if [ "$mypy_failed" = 1 ]; then
  cat "$W"/mypy-*.txt >&2
  exit 1
fi
# the layer contract (docs/architecture.md): cmx-core's layers import only downwards and the
# plugins' src only cmx_core.api and cmx_core.errors (pyproject's [tool.importlinter])
echo "scripts/test.sh: lint-imports" >&2
.venv/bin/lint-imports --no-cache

if [ "$(id -u)" = "0" ]; then
  cmx_docker_start "$W" || echo "scripts/test.sh: no Docker engine; container tests will say why" >&2
  # free ports, not Slurm's 6817/6818: another run of this suite (or a real Slurm) on the machine
  # may hold those, and slurmd would fail to bind
  read -r ctld_port slurmd_port < <(.venv/bin/python -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
  export CMX_SLURMCTLD_PORT="${CMX_SLURMCTLD_PORT:-$ctld_port}" CMX_SLURMD_PORT="${CMX_SLURMD_PORT:-$slurmd_port}"
  cmx_slurm_start "$SLURM_W" || echo "scripts/test.sh: no Slurm; slurm tests will say why" >&2
else
  echo "scripts/test.sh: not root, so no private Docker engine is started" >&2
fi

# a shared place for slow fixtures (e.g. the debootstrap root filesystem) within this run
export CMX_TEST_CACHE="${CMX_TEST_CACHE:-$W/test-cache}"
mkdir -p "$CMX_TEST_CACHE"

# pytest sees the machine as a fresh one would (#52): an empty TMPDIR and HOME of this run's own
# (scripts/fresh-env.sh), so no /tmp/ray, ~/.cache or other leftover of an earlier run counts
cmx_fresh_env

# with a PATH among the arguments only those paths run; otherwise the default list below
given_paths=0
for arg in "$@"; do
  case "$arg" in -*) ;; *) [ -e "${arg%%::*}" ] && given_paths=1 ;; esac
done
# The whole list runs on CMX_TEST_WORKERS pytest-xdist workers (default 4: most of the suite
# waits on subprocesses, containers and schedulers, so 4 keep 2 cores busy); each test file
# stays on one worker and the Ray and Slurm tests share one (conftest.py). CMX_TEST_WORKERS=0
# runs it in this process, one test at a time. A test still running after CMX_TEST_TIMEOUT
# seconds (default 1800) fails with its stack, so one hang cannot eat the run; the 25
# slowest tests are listed at the end.
parallel=()
[ "$workers" -gt 0 ] && parallel=(-n "$workers" --dist loadscope --no-loadscope-reorder)
started=$SECONDS
set +e
if [ "$given_paths" = 1 ]; then
  echo "scripts/test.sh: pytest over the given paths only" >&2
  .venv/bin/python -m pytest --import-mode=importlib -p no:cacheprovider \
    --timeout="${CMX_TEST_TIMEOUT:-1800}" "$@"
else
  echo "scripts/test.sh: pytest over every test directory (${workers} workers)" >&2
  .venv/bin/python -m pytest --import-mode=importlib -p no:cacheprovider \
    --timeout="${CMX_TEST_TIMEOUT:-1800}" --durations=25 "${parallel[@]}" \
    tests plugins/detect/tests plugins/docker/tests plugins/mlperf/tests plugins/slurm/tests \
    plugins/ray/tests plugins/k8s/tests plugins/mlebench/tests plugins/cm/tests \
    plugins/alebench/tests plugins/train/tests "$@"
fi
status=$?
set -e
echo "scripts/test.sh: pytest took $((SECONDS - started)) s" >&2
# pytest's own codes pass through: 1 failures, 2 interrupted, 3 internal error, 4 usage error,
# and 5 when no test was collected, which is a failure too (a wrong path or -k selects nothing)
exit "$status"
