#!/usr/bin/env bash
# Installs cmx-core and the in-tree plugins into .venv (created if missing).
#   bash scripts/install.sh          # what the quick start's benchmark needs
#   bash scripts/install.sh --test   # plus the test tools (pytest, and the pinned ruff, mypy and stubs)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Progress goes to stderr, one line per phase, and pip shows what it installs. Nothing is
# reinstalled when nothing changed: .venv/.cmx-install-stamp holds a digest of every
# pyproject.toml (the pins), constraints.txt and this script, then the mode; a matching stamp
# ends the script at once. One stamp serves both modes: a --test install (a superset) satisfies
# a plain one, so scripts/benchmark.sh right after scripts/test.sh installs nothing, and a
# --test install after a plain one adds only the test tools.
say() { echo "scripts/install.sh: $*" >&2; }
started=$SECONDS
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
stamp_file=.venv/.cmx-install-stamp
digest=$(cat pyproject.toml plugins/*/pyproject.toml constraints.txt scripts/install.sh scripts/test_requirements.py \
  | sha256sum | cut -c1-64)
stamp="$digest mode=${extras}"
# the tests' system tools, as root: bubblewrap (the sandbox, docs/sandbox.md), headless Chromium
# (the HTML report is rendered for real, docs/reports.md), ssh-keygen (signed bundles) and
# OpenMPI's mpirun (cmx-train's mpirun launcher), and Prometheus with promtool (a real server
# scrapes a run; promtool imports its series, docs/telemetry.md)
# (CMX_INSTALL_NO_APT=1 skips them: the install script's own tests)
if [ -n "$extras" ] && [ "$(id -u)" = 0 ] && [ -z "${CMX_INSTALL_NO_APT:-}" ] && command -v apt-get >/dev/null; then
  missing=()
  command -v bwrap >/dev/null || missing+=(bubblewrap)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  command -v mpirun >/dev/null || missing+=(openmpi-bin)
  { command -v prometheus >/dev/null && command -v promtool >/dev/null; } || missing+=(prometheus)
  if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null ||
      { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
  fi
fi
up_to_date() {  # the same digest, and the mode asked for or the test mode that includes it
  local have
  have=$(cat "$stamp_file" 2>/dev/null) || return 1
  [ "$have" = "$stamp" ] || { [ -z "$extras" ] && [ "$have" = "$digest mode=[test]" ]; }
}
if [ -x .venv/bin/python ] && up_to_date; then
  say "up to date (nothing changed since the last install; remove $stamp_file to force one)"
  exit 0
fi
# a --test install right after a plain one (scripts/test.sh after scripts/benchmark.sh, nothing
# else changed) adds only the test tools, each pyproject's test extra, instead of installing
# everything again; where they cannot be listed (Python 3.10), everything is installed
if [ -n "$extras" ] && [ -x .venv/bin/python ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$digest mode=" ] &&
    tools=$(.venv/bin/python scripts/test_requirements.py) && [ -n "$tools" ]; then
  say "adding the test tools to the install scripts/benchmark.sh made"
  mapfile -t tools_list <<< "$tools"
  .venv/bin/python -m pip install --progress-bar off -c constraints.txt "${tools_list[@]}"
  echo "$stamp" > "$stamp_file"
  say "done in $((SECONDS - started)) s"
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
rm -f "$stamp_file"
pip=(.venv/bin/python -m pip install --progress-bar off -c constraints.txt)
# pip and torch first, each pinned by constraints.txt: the newer pip resolves from the index's
# metadata files; this machine class carries a CPU build of that torch
say "1/2 pip and torch (pinned)"
"${pip[@]}" pip torch
say "2/2 cmx-core and the in-tree plugins${extras:+, with the test tools}"
"${pip[@]}" -e ".${extras}" -e "plugins/detect${extras}" -e "plugins/docker${extras}" -e "plugins/mlperf[llm,vision,plot${extras:+,test}]" \
  -e "plugins/slurm${extras}" -e "plugins/ray${extras}" -e "plugins/k8s${extras}" \
  -e "plugins/mlebench${extras:+[test]}" -e "plugins/cm${extras:+[test]}" \
  -e "plugins/alebench[docker${extras:+,test}]" -e "plugins/train${extras}"
echo "$stamp" > "$stamp_file"
say "done in $((SECONDS - started)) s"
