# shellcheck shell=bash
# Start and stop a private Docker daemon for cmx's tests. Source this file, then:
#
#   cmx_docker_start "$W"   # installs docker.io/debootstrap if missing, starts dockerd on
#                           # unix://$W/docker.sock, waits until ready, exports DOCKER_HOST
#   ...
#   cmx_docker_stop         # kills that dockerd by PID and waits for it
#
# The daemon keeps all state under $W/docker, never touches iptables or host bridges
# (--iptables=false --bridge=none), and listens only on its private unix socket.

CMX_DOCKERD_PID=""
CMX_DOCKER_WORK=""

_cmx_docker_install() {
  if command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != "0" ]; then
    echo "cmx_docker_start: dockerd/debootstrap missing and not root; install docker.io and debootstrap" >&2
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
}

cmx_docker_start() {
  local work="${1:?usage: cmx_docker_start WORKDIR}"
  _cmx_docker_install || return 1
  mkdir -p "$work/docker" || return 1
  CMX_DOCKER_WORK=$(cd "$work" && pwd)
  local sock="$work/docker.sock"
  dockerd --data-root "$work/docker" --exec-root "$work/docker-exec" \
    --pidfile "$work/dockerd.pid" --iptables=false --bridge=none \
    --host "unix://$sock" >"$work/dockerd.log" 2>&1 &
  CMX_DOCKERD_PID=$!
  export CMX_DOCKERD_PID
  export DOCKER_HOST="unix://$sock"
  local i
  for i in $(seq 1 150); do
    if [ -S "$sock" ] && docker -H "unix://$sock" info >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$CMX_DOCKERD_PID" 2>/dev/null; then
      echo "cmx_docker_start: dockerd exited; last log lines:" >&2
      tail -n 5 "$work/dockerd.log" >&2
      CMX_DOCKERD_PID=""
      return 1
    fi
    sleep 0.2
  done
  echo "cmx_docker_start: dockerd not ready after 30 s (log: $work/dockerd.log)" >&2
  cmx_docker_stop
  return 1
}

cmx_docker_stop() {
  if [ -n "${CMX_DOCKERD_PID:-}" ]; then
    kill "$CMX_DOCKERD_PID" 2>/dev/null || true
    wait "$CMX_DOCKERD_PID" 2>/dev/null || true
    CMX_DOCKERD_PID=""
  fi
  # dockerd leaves its network namespace mounted under the exec root; unmount it so the
  # caller can remove WORKDIR.
  if [ -n "${CMX_DOCKER_WORK:-}" ] && [ -d "$CMX_DOCKER_WORK/docker-exec/netns" ]; then
    local m
    for m in "$CMX_DOCKER_WORK"/docker-exec/netns/*; do
      [ -e "$m" ] && umount "$m" 2>/dev/null || true
    done
  fi
  unset DOCKER_HOST
}
