# shellcheck shell=bash
# Start and stop a multi-node test bed in network namespaces: N nodes (default 2), each a
# network namespace plus a UTS namespace (hostnames cmxn1, cmxn2, ...) and a mount namespace
# (a hosts file that names every node over /etc/hosts), on a bridge that
# exists only inside a hub namespace the bed makes. On it run a private Slurm (slurmctld on
# node 1, one slurmd per node, NodeAddr the node's address) and a Ray cluster (head on node 1,
# one worker on every other node; CMX_NETBED_RAY=0 leaves Ray out, CMX_NETBED_RAY_HEAD_CPUS=0
# keeps tasks off the head). Needs root (namespaces,
# munged as the munge user). Source this file, then:
#
#   cmx_netbed_start "$W" [N]   # makes the namespaces, starts the daemons, waits until every
#                               # Slurm node is idle and `ray start` returned on every node; writes
#                               # $W/netbed.env (names, addresses, PIDs) and exports its values
#   cmx_netbed_exec I CMD...    # runs CMD inside node I's namespaces (srun, python, torchrun)
#   ...
#   cmx_netbed_stop [$W]        # kills every process in the bed's namespaces, munged and the
#                               # watcher by PID,
#                               # deletes the namespaces (their veths and bridge go with them)
#                               # and unmounts the UTS and mount namespaces: exactly what start made
#
# With CMX_NETBED_OWNER_PID set, a watcher stops the bed by itself once that process is gone
# (a test session killed before its teardown).
#
# Nothing leaves the machine: the node addresses (10.213.0.I/24, a private range) live only on
# veths inside the bed's namespaces, the host's own network namespace gets no interface and no
# route, and no namespace has a default route. Every namespace's name carries the prefix cmxnb-
# and a per-run token (the interfaces, hostnames and ports exist only inside them), so two beds
# (and the suite's loopback Slurm of slurm.sh, whose ports and files are elsewhere) never meet. Everything else lives under $W: the munge key and socket, the
# Slurm state, spool, PID and log files, Ray's temp dirs. Nothing in /etc is written.

_CMX_NETBED_SCRIPT="${BASH_SOURCE[0]}"
CMX_NETBED_WORK=""
CMX_NETBED_TOKEN=""
CMX_NETBED_NODES=""
CMX_NETBED_MUNGED_PID=""
CMX_NETBED_SLURMCTLD_PID=""
CMX_NETBED_WATCH_PID=""
CMX_NETBED_SUBNET="10.213.0"
CMX_NETBED_RAY_PORT="${CMX_NETBED_RAY_PORT:-6479}"

_cmx_netbed_ns() {  # I: the network namespace of node I (0 = the hub with the bridge)
  if [ "$1" = 0 ]; then echo "cmxnb-$CMX_NETBED_TOKEN-hub"; else echo "cmxnb-$CMX_NETBED_TOKEN-n$1"; fi
}

cmx_netbed_exec() {  # I CMD...: run CMD in node I's network, UTS and mount namespaces
  local i="${1:?usage: cmx_netbed_exec NODE CMD...}"
  shift
  nsenter --net="/run/netns/$(_cmx_netbed_ns "$i")" --uts="$CMX_NETBED_WORK/ns/uts-n$i" \
    --mount="$CMX_NETBED_WORK/ns/mnt-n$i" -- "$@"
}

_cmx_netbed_check() {
  local cmd
  if [ "$(id -u)" != "0" ]; then
    echo "cmx_netbed_start: needs root (network namespaces, munged)" >&2
    return 1
  fi
  for cmd in ip nsenter unshare munged slurmctld slurmd sinfo ray; do
    command -v "$cmd" >/dev/null 2>&1 || { echo "cmx_netbed_start: $cmd not found" >&2; return 1; }
  done
}

_cmx_netbed_save() {  # write $W/netbed.env: what stop removes, and what tests need to use the bed
  cat >"$CMX_NETBED_WORK/netbed.env" <<EOF
CMX_NETBED_WORK=$CMX_NETBED_WORK
CMX_NETBED_TOKEN=$CMX_NETBED_TOKEN
CMX_NETBED_NODES=$CMX_NETBED_NODES
CMX_NETBED_SUBNET=$CMX_NETBED_SUBNET
CMX_NETBED_MUNGED_PID=$CMX_NETBED_MUNGED_PID
CMX_NETBED_SLURMCTLD_PID=$CMX_NETBED_SLURMCTLD_PID
CMX_NETBED_WATCH_PID=$CMX_NETBED_WATCH_PID
CMX_NETBED_SLURM_CONF=$CMX_NETBED_WORK/slurm/slurm.conf
CMX_NETBED_RAY_ADDRESS=$CMX_NETBED_SUBNET.1:$CMX_NETBED_RAY_PORT
EOF
}

_cmx_netbed_network() {  # the hub with its bridge, then each node on a veth into it
  local hub i ns
  hub=$(_cmx_netbed_ns 0)
  ip netns add "$hub" || return 1
  ip -n "$hub" link add br0 type bridge || return 1
  ip -n "$hub" link set br0 up || return 1
  mkdir -p "$CMX_NETBED_WORK/ns" || return 1
  # a namespace is kept by a bind mount of it, which needs a directory of private propagation
  mount --bind "$CMX_NETBED_WORK/ns" "$CMX_NETBED_WORK/ns" && mount --make-private "$CMX_NETBED_WORK/ns" ||
    return 1
  echo "127.0.0.1 localhost" >"$CMX_NETBED_WORK/hosts"
  for i in $(seq 1 "$CMX_NETBED_NODES"); do
    echo "$CMX_NETBED_SUBNET.$i cmxn$i" >>"$CMX_NETBED_WORK/hosts"
  done
  for i in $(seq 1 "$CMX_NETBED_NODES"); do
    ns=$(_cmx_netbed_ns "$i")
    ip netns add "$ns" || return 1
    # both ends are made inside the bed's namespaces: the host never sees them
    ip -n "$hub" link add "v$i" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$hub" link set "v$i" master br0 up || return 1
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" addr add "$CMX_NETBED_SUBNET.$i/24" dev eth0 || return 1
    ip -n "$ns" link set eth0 up || return 1
    touch "$CMX_NETBED_WORK/ns/uts-n$i" || return 1
    unshare --uts="$CMX_NETBED_WORK/ns/uts-n$i" hostname "cmxn$i" || return 1
    # the nodes' names resolve on every node, as on a cluster: the bed's hosts file over
    # /etc/hosts in a mount namespace of the node's own (the host's /etc is not written)
    touch "$CMX_NETBED_WORK/ns/mnt-n$i" || return 1
    unshare --mount="$CMX_NETBED_WORK/ns/mnt-n$i" --propagation slave \
      mount --bind "$CMX_NETBED_WORK/hosts" /etc/hosts || return 1
  done
}

_cmx_netbed_slurm_conf() {  # write $W/slurm/slurm.conf
  local w="$CMX_NETBED_WORK/slurm" i nodes=""
  for i in $(seq 1 "$CMX_NETBED_NODES"); do nodes="$nodes${nodes:+,}cmxn$i"; done
  {
    cat <<EOF
# Written by scripts/services/netbed.sh for a private multi-node test bed; do not edit.
ClusterName=cmxnb$CMX_NETBED_TOKEN
SlurmctldHost=cmxn1($CMX_NETBED_SUBNET.1)
SlurmctldPort=${CMX_NETBED_SLURMCTLD_PORT:-6917}
SlurmdPort=${CMX_NETBED_SLURMD_PORT:-6918}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$CMX_NETBED_WORK/munge/munge.sock
StateSaveLocation=$w/state
SlurmdSpoolDir=$w/spool-%n
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd-%n.pid
SlurmctldLogFile=$w/slurmctld.log
SlurmdLogFile=$w/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$w/jobcomp.log
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000
MessageTimeout=5
SlurmdTimeout=30
SlurmctldTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=300
EOF
    for i in $(seq 1 "$CMX_NETBED_NODES"); do
      echo "NodeName=cmxn$i NodeAddr=$CMX_NETBED_SUBNET.$i NodeHostname=cmxn$i CPUs=2 RealMemory=1024 State=UNKNOWN"
    done
    echo "PartitionName=bed Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$w/slurm.conf"
}

_cmx_netbed_wait_pidfile() {  # FILE SECONDS: print the PID once the file holds a live one
  local file="$1" i pid
  for i in $(seq 1 $(($2 * 20))); do
    if [ -s "$file" ]; then
      pid=$(tr -dc '0-9' <"$file")
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        echo "$pid"
        return 0
      fi
    fi
    sleep 0.05
  done
  return 1
}

_cmx_netbed_slurm() {  # munged (host: a unix socket only), slurmctld on node 1, slurmd on each node
  local w="$CMX_NETBED_WORK" i
  mkdir -p "$w/slurm/state" "$w/munge" || return 1
  chmod 0755 "$w" "$w/slurm"
  chown munge:munge "$w/munge" && chmod 0711 "$w/munge"
  dd if=/dev/urandom of="$w/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$w/munge/munge.key" && chmod 0400 "$w/munge/munge.key"
  runuser -u munge -- munged --socket="$w/munge/munge.sock" --key-file="$w/munge/munge.key" \
    --pid-file="$w/munge/munged.pid" --log-file="$w/munge/munged.log" \
    --seed-file="$w/munge/munged.seed" || { echo "cmx_netbed_start: munged did not start" >&2; return 1; }
  CMX_NETBED_MUNGED_PID=$(_cmx_netbed_wait_pidfile "$w/munge/munged.pid" 10) ||
    { echo "cmx_netbed_start: munged wrote no PID" >&2; return 1; }
  _cmx_netbed_save
  _cmx_netbed_slurm_conf
  cmx_netbed_exec 1 slurmctld -f "$w/slurm/slurm.conf" >>"$w/slurm/slurmctld.out" 2>&1 ||
    { echo "cmx_netbed_start: slurmctld failed; see $w/slurm/slurmctld.log" >&2; return 1; }
  CMX_NETBED_SLURMCTLD_PID=$(_cmx_netbed_wait_pidfile "$w/slurm/slurmctld.pid" 30) ||
    { echo "cmx_netbed_start: slurmctld wrote no PID; see $w/slurm/slurmctld.log" >&2; return 1; }
  _cmx_netbed_save
  for i in $(seq 1 "$CMX_NETBED_NODES"); do
    cmx_netbed_exec "$i" slurmd -f "$w/slurm/slurm.conf" -N "cmxn$i" >>"$w/slurm/slurmd-cmxn$i.out" 2>&1 ||
      { echo "cmx_netbed_start: slurmd on cmxn$i failed; see $w/slurm/slurmd-cmxn$i.log" >&2; return 1; }
  done
}

_cmx_netbed_slurm_idle() {  # wait (30 s at most) until sinfo shows every node idle
  local i idle
  for i in $(seq 1 300); do
    idle=$(SLURM_CONF="$CMX_NETBED_WORK/slurm/slurm.conf" cmx_netbed_exec 1 sinfo -h -N -t idle -o %N 2>/dev/null |
      sort -u | wc -l)
    [ "$idle" = "$CMX_NETBED_NODES" ] && return 0
    sleep 0.1
  done
  echo "cmx_netbed_start: $idle of $CMX_NETBED_NODES Slurm nodes idle after 30 s; see $CMX_NETBED_WORK/slurm/" >&2
  return 1
}

_cmx_netbed_ray_node() {  # I: ray start on node I (the head on node 1), temp dir under $W
  local i="$1" role env=(RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0) cpus=1
  if [ "$i" = 1 ]; then
    role=(--head --port="$CMX_NETBED_RAY_PORT" --include-dashboard=false)
    cpus="${CMX_NETBED_RAY_HEAD_CPUS:-1}"  # 0: tasks go to the workers only
  else
    role=(--address="$CMX_NETBED_SUBNET.1:$CMX_NETBED_RAY_PORT")
    # Ray's own budget for reaching the GCS (about a second a try): the head starts meanwhile
    env+=(RAY_gcs_server_port_wait_time_s=150)
  fi
  cmx_netbed_exec "$i" env "${env[@]}" timeout 180 ray start "${role[@]}" \
    --node-ip-address="$CMX_NETBED_SUBNET.$i" --num-cpus="$cpus" --object-store-memory=100000000 \
    --include-log-monitor=false --temp-dir="$CMX_NETBED_WORK/ray-n$i" --disable-usage-stats \
    >"$CMX_NETBED_WORK/ray-n$i.out" 2>&1 ||
    { echo "cmx_netbed_start: ray start on cmxn$i failed; see $CMX_NETBED_WORK/ray-n$i.out" >&2; return 1; }
}

_cmx_netbed_ray() {  # the head and the workers side by side (a worker waits for the head's GCS)
  local i pids=() pid rc=0
  for i in $(seq 1 "$CMX_NETBED_NODES"); do
    _cmx_netbed_ray_node "$i" &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return "$rc"
}

_cmx_netbed_watch() {  # OWNER: a watcher that stops the bed once OWNER is gone
  # deaf to the terminal's SIGINT/SIGHUP (a Ctrl-C of the session must not leave the bed behind);
  # exec keeps the PID that $! names, the one stop kills
  (
    trap '' INT HUP
    exec bash -c 'source "$1"; while kill -0 "$2" 2>/dev/null; do sleep 1; done; cmx_netbed_stop "$3"' \
      netbed-watch "$_CMX_NETBED_SCRIPT" "$1" "$CMX_NETBED_WORK"
  ) </dev/null >>"$CMX_NETBED_WORK/watch.log" 2>&1 &
  CMX_NETBED_WATCH_PID=$!
}

cmx_netbed_start() {
  local work="${1:?usage: cmx_netbed_start WORKDIR [NODES]}" ray_pid="" rc=0
  CMX_NETBED_NODES="${2:-2}"
  case "$CMX_NETBED_NODES" in
    [1-9] | [1-9][0-9]) ;;
    *) echo "cmx_netbed_start: NODES must be 1..99, not '$CMX_NETBED_NODES'" >&2; return 1 ;;
  esac
  _cmx_netbed_check || return 1
  mkdir -p "$work" || return 1
  CMX_NETBED_WORK=$(cd "$work" && pwd)
  CMX_NETBED_TOKEN=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
  CMX_NETBED_MUNGED_PID=""
  CMX_NETBED_SLURMCTLD_PID=""
  CMX_NETBED_WATCH_PID=""
  if [ -n "${CMX_NETBED_OWNER_PID:-}" ]; then _cmx_netbed_watch "$CMX_NETBED_OWNER_PID"; fi
  _cmx_netbed_save  # first, so that stop finds whatever a failed start made
  _cmx_netbed_network || { echo "cmx_netbed_start: could not make the namespaces" >&2; cmx_netbed_stop; return 1; }
  # Ray (seconds per node) starts while Slurm does; CMX_NETBED_RAY=0 leaves it out
  if [ "${CMX_NETBED_RAY:-1}" != 0 ]; then
    _cmx_netbed_ray &
    ray_pid=$!
  fi
  _cmx_netbed_slurm && _cmx_netbed_slurm_idle || rc=1
  if [ -n "${ray_pid:-}" ]; then wait "$ray_pid" || rc=1; fi
  if [ "$rc" != 0 ]; then
    cmx_netbed_stop
    return 1
  fi
  _cmx_netbed_save
  export CMX_NETBED_WORK CMX_NETBED_TOKEN CMX_NETBED_NODES CMX_NETBED_SUBNET CMX_NETBED_MUNGED_PID \
    CMX_NETBED_SLURMCTLD_PID CMX_NETBED_WATCH_PID
}

_cmx_netbed_kill() {  # SECONDS PID...: SIGTERM, wait SECONDS at most, then SIGKILL what is left
  local i pid left ticks=$(($1 * 20))
  shift
  [ "$#" -gt 0 ] || return 0
  kill "$@" 2>/dev/null
  for i in $(seq 1 "$ticks"); do
    left=""
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
    [ -z "$left" ] && return 0
    sleep 0.05
  done
  # shellcheck disable=SC2086
  kill -9 $left 2>/dev/null || true
}

_cmx_netbed_pids() {  # every process in the bed's node namespaces
  local i ns
  for i in $(seq 1 "$CMX_NETBED_NODES"); do
    ns=$(_cmx_netbed_ns "$i")
    [ -e "/run/netns/$ns" ] && ip netns pids "$ns" 2>/dev/null
  done
}

cmx_netbed_stop() {
  if [ -n "${1:-}" ]; then
    # shellcheck disable=SC1091
    source "$1/netbed.env" || return 1
  fi
  [ -n "${CMX_NETBED_TOKEN:-}" ] || return 0
  local i ns pids kind
  # the watcher first (unless this is the watcher stopping the bed), so that it stops nothing twice
  if [ -n "${CMX_NETBED_WATCH_PID:-}" ] && [ "$CMX_NETBED_WATCH_PID" != "$$" ]; then
    _cmx_netbed_kill 3 "$CMX_NETBED_WATCH_PID"
  fi
  # Every process in a node's namespace was started there by the bed (or by a user of the bed):
  # all of them at once, since Ray's take seconds; again for any a dying one started.
  for _ in 1 2 3; do
    pids=$(_cmx_netbed_pids)
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    _cmx_netbed_kill 3 $pids
  done
  _cmx_netbed_kill 10 ${CMX_NETBED_MUNGED_PID:-}
  for i in $(seq "$CMX_NETBED_NODES" -1 0); do
    ns=$(_cmx_netbed_ns "$i")
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
    [ "$i" = 0 ] && continue
    for kind in uts mnt; do
      if mountpoint -q "$CMX_NETBED_WORK/ns/$kind-n$i" 2>/dev/null; then umount "$CMX_NETBED_WORK/ns/$kind-n$i"; fi
    done
  done
  if mountpoint -q "$CMX_NETBED_WORK/ns" 2>/dev/null; then umount "$CMX_NETBED_WORK/ns"; fi
  CMX_NETBED_MUNGED_PID=""
  CMX_NETBED_SLURMCTLD_PID=""
  CMX_NETBED_WATCH_PID=""
  CMX_NETBED_TOKEN=""
  # a stopped bed's file names no PID, so a second stop kills nothing that reused one
  if [ -d "$CMX_NETBED_WORK" ]; then _cmx_netbed_save; fi
}
