#!/usr/bin/env bash
# The sandbox, step containment, MLE-bench and ALE-Bench tests as users run them (#36 item 4): as an unprivileged
# user this script creates, from a clone of this checkout's HEAD in that user's home, with a
# venv there made from the system's python3 (a user cannot reach root's interpreter). Run as
# root (it creates and removes the user); .ci/run calls it after scripts/test.sh.
#   bash scripts/test-as-user.sh [pytest args...]
# Tests that need root (sessions, cgroups, a Docker engine, creating users) skip with their
# reason there; everything else must pass as on a user's machine. CI is not set for that run:
# CI turns those skips into failures.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "scripts/test-as-user.sh: $*" >&2; }
if [ "$(id -u)" != 0 ]; then
  say "needs root: it creates an unprivileged user (run the tests yourself as you are instead)"
  exit 2
fi
started=$SECONDS
user="cmx-ci-$$"
useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
cleanup() {
  local pid
  for pid in $(pgrep -u "$user" || true); do kill -KILL "$pid" 2>/dev/null || true; done
  userdel --remove "$user" 2>/dev/null || true
  rm -rf "$home"
}
trap cleanup EXIT
git clone -q --no-hardlinks "$PWD" "$home/cmx"
chown -R "$user:" "$home/cmx"
as_user() {
  runuser -u "$user" -- env -i HOME="$home" USER="$user" LANG=C.UTF-8 PATH="$home/cmx/.venv/bin:/usr/bin:/bin" \
    bash -c "cd ~/cmx && $1"
}
say "installing into $home/cmx/.venv as $user"
as_user "/usr/bin/python3 -m venv .venv && .venv/bin/python -m pip install -q --progress-bar off pytest \
  pytest-xdist==3.8.0 -e . -e 'plugins/mlebench[test]' -e 'plugins/alebench[test]'"
say "running the sandbox, step containment, MLE-bench and ALE-Bench tests as $user (uid $(id -u "$user"))"
extra=""
[ "$#" -gt 0 ] && extra=$(printf ' %q' "$@")
# on 3 workers, each test file on one (the root conftest.py), as scripts/test.sh runs them
as_user ".venv/bin/python -m pytest -q -rs -p no:cacheprovider --import-mode=importlib \
  -n 3 --dist loadscope --no-loadscope-reorder tests/test_sandbox_*.py tests/test_step_containment.py \
  plugins/mlebench/tests plugins/alebench/tests$extra"
say "done in $((SECONDS - started)) s"
