#!/usr/bin/env bash
# Installs cmx-core and the in-tree plugins into .venv (created if missing).
#   bash scripts/install.sh          # what the quick start's benchmark needs
#   bash scripts/install.sh --test   # plus the test tools (pytest, and the pinned ruff, mypy and stubs)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Progress goes to stderr, one line per phase, and pip shows what it installs. Nothing is
# reinstalled when nothing changed: .venv/.cmx-install-stamp holds a digest of every
# pyproject.toml (the pins), this script and the mode; a matching stamp ends the script at once.
say() { echo "scripts/install.sh: $*" >&2; }
started=$SECONDS
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
stamp_file=.venv/.cmx-install-stamp
stamp=$( { cat pyproject.toml plugins/*/pyproject.toml scripts/install.sh; echo "mode=${extras}"; } | sha256sum | cut -c1-64)
# the tests' system tools, as root: bubblewrap (the sandbox, docs/sandbox.md), headless Chromium
# (the HTML report is rendered for real, docs/reports.md), ssh-keygen (signed bundles) and
# Prometheus with promtool (a real server scrapes a run; promtool imports its series, docs/telemetry.md)
if [ -n "$extras" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  command -v bwrap >/dev/null || missing+=(bubblewrap)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  { command -v prometheus >/dev/null && command -v promtool >/dev/null; } || missing+=(prometheus)
  if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null ||
      { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
  fi
fi
if [ -x .venv/bin/python ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  say "up to date (nothing changed since the last install; remove $stamp_file to force one)"
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
rm -f "$stamp_file"
pip=(.venv/bin/python -m pip install --progress-bar off)
# torch first and pinned: this machine class carries a CPU build of exactly this version
say "1/2 torch (pinned)"
"${pip[@]}" torch==2.13.0
say "2/2 cmx-core and the in-tree plugins${extras:+, with the test tools}"
"${pip[@]}" -e ".${extras}" -e "plugins/detect${extras}" -e "plugins/docker${extras}" -e "plugins/mlperf[llm,vision,plot${extras:+,test}]" \
  -e "plugins/slurm${extras}" -e "plugins/ray${extras}" -e "plugins/k8s${extras}" \
  -e "plugins/mlebench${extras:+[test]}" -e "plugins/cm${extras:+[test]}" \
  -e "plugins/alebench[docker${extras:+,test}]"
echo "$stamp" > "$stamp_file"
say "done in $((SECONDS - started)) s"
