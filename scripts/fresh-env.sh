# shellcheck shell=bash
# The machine as a fresh one shows it to the test suite (#52), sourced by scripts/test.sh:
#
#   cmx_fresh_env          # before pytest; the caller removes "$CMX_FRESH" afterwards
#
# makes CMX_FRESH, a directory of the run's own (under the caller's TMPDIR, else /tmp), and
# exports an empty TMPDIR (mode 1777, as /tmp is) and an empty HOME in it, so /tmp/ray,
# ~/.cache, ~/.cmx and other leftovers of earlier runs on this machine are not seen, and what
# the suite leaves there (Ray's session files, caches) goes with the directory. Variables that
# would point past them (RAY_TMPDIR, CMX_HOME, XDG_*_HOME) are unset. The paths are short:
# Ray's unix sockets live below TMPDIR and must fit AF_UNIX's 107 bytes.
#
# What is installed, not left behind, in the old HOME still works: its toolchains (rustup's
# ~/.rustup and ~/.cargo, pyenv's ~/.pyenv) and pip's user config (~/.config/pip/pip.conf: the
# package index), through the variables those tools read. The docker client's ~/.docker is not
# kept (its contexts could point past the suite's own engine; DOCKER_HOST names that one).
cmx_fresh_env() {
  local old_home=${HOME:-}
  CMX_FRESH=$(mktemp -d "${TMPDIR:-/tmp}/cmx-t.XXXXXX")
  chmod 0755 "$CMX_FRESH"
  mkdir -m 1777 "$CMX_FRESH/tmp"
  mkdir -m 0700 "$CMX_FRESH/home"
  if [ -n "$old_home" ]; then
    [ -n "${RUSTUP_HOME:-}" ] || [ ! -d "$old_home/.rustup" ] || export RUSTUP_HOME="$old_home/.rustup"
    [ -n "${CARGO_HOME:-}" ] || [ ! -d "$old_home/.cargo" ] || export CARGO_HOME="$old_home/.cargo"
    [ -n "${PYENV_ROOT:-}" ] || [ ! -d "$old_home/.pyenv" ] || export PYENV_ROOT="$old_home/.pyenv"
    [ -n "${PIP_CONFIG_FILE:-}" ] || [ ! -f "$old_home/.config/pip/pip.conf" ] ||
      export PIP_CONFIG_FILE="$old_home/.config/pip/pip.conf"
  fi
  export CMX_FRESH TMPDIR="$CMX_FRESH/tmp" HOME="$CMX_FRESH/home"
  unset RAY_TMPDIR CMX_HOME XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME
}
