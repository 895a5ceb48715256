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
cmx_fresh_env() {
  CMX_FRESH=$(mktemp -d "${TMPDIR:-/tmp}/cmx-t.XXXXXX")
  chmod 0755 "$CMX_FRESH"
  mkdir -m 1777 "$CMX_FRESH/tmp"
  mkdir -m 0700 "$CMX_FRESH/home"
  export CMX_FRESH TMPDIR="$CMX_FRESH/tmp" HOME="$CMX_FRESH/home"
  unset RAY_TMPDIR CMX_HOME XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME
}
