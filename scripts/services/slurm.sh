# shellcheck shell=bash
# Start and stop a private single-node Slurm (munged, slurmctld, slurmd) for cmx's tests.
# Source this file, then:
#
#   cmx_slurm_start "$W"   # installs slurm-wlm/munge if missing (root), writes $W/slurm.conf,
#                          # starts the three daemons, waits until the node is idle and
#                          # exports SLURM_CONF (and CMX_SLURM_*_PID)
#   ...
#   cmx_slurm_stop         # kills slurmd, slurmctld, munged by their PIDs and waits for each
#
# Everything lives under $W: the munge key and socket (a private key: the system's munged, if
# any, is never used), the state, spool, PID and log files. Nothing in /etc is written. The
# controller listens on 127.0.0.1 only (the node is this host's short name, addressed as
# 127.0.0.1); ports default to 6817/6818 and can be moved with CMX_SLURMCTLD_PORT and
# CMX_SLURMD_PORT. The scheduler is tuned for latency, not throughput: jobs are scheduled on
# submit and the controller answers short timeouts (see the SchedulerParameters line).

CMX_SLURM_WORK=""
CMX_MUNGED_PID=""
CMX_SLURMCTLD_PID=""
CMX_SLURMD_PID=""

_cmx_slurm_install() {
  if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 &&
    command -v munged >/dev/null 2>&1 && command -v sbatch >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != "0" ]; then
    echo "cmx_slurm_start: slurm-wlm/munge missing and not root; install slurm-wlm and munge" >&2
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

_cmx_slurm_wait_pidfile() {  # FILE SECONDS: print the PID once the file holds a live one
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

_cmx_slurm_conf() {  # WORKDIR HOST: write WORKDIR/slurm.conf
  local w="$1" host="$2"
  local cpus mem
  cpus=$(nproc)
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  cat >"$w/slurm.conf" <<EOF
# Written by scripts/services/slurm.sh for a private test cluster; do not edit.
ClusterName=cmxtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${CMX_SLURMCTLD_PORT:-6817}
SlurmdPort=${CMX_SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$w/munge/munge.sock
StateSaveLocation=$w/state
SlurmdSpoolDir=$w/spool
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd.pid
SlurmctldLogFile=$w/slurmctld.log
SlurmdLogFile=$w/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$w/jobcomp.log
# Latency: schedule each job when it is submitted, answer fast, forget the dead fast.
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000
MessageTimeout=5
SlurmdTimeout=30
SlurmctldTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=300
MaxArraySize=10001
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

cmx_slurm_start() {
  local work="${1:?usage: cmx_slurm_start WORKDIR}"
  _cmx_slurm_install || return 1
  mkdir -p "$work" || return 1
  CMX_SLURM_WORK=$(cd "$work" && pwd)
  local w="$CMX_SLURM_WORK" host
  host=$(hostname -s)
  mkdir -p "$w/state" "$w/spool" "$w/munge" || return 1
  # munged runs as munge, refuses a socket directory others cannot enter or can write.
  chmod 0755 "$w"
  chown munge:munge "$w/munge" && chmod 0711 "$w/munge"
  dd if=/dev/urandom of="$w/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$w/munge/munge.key" && chmod 0400 "$w/munge/munge.key"
  runuser -u munge -- munged --socket="$w/munge/munge.sock" --key-file="$w/munge/munge.key" \
    --pid-file="$w/munge/munged.pid" --log-file="$w/munge/munged.log" \
    --seed-file="$w/munge/munged.seed" || { echo "cmx_slurm_start: munged did not start" >&2; return 1; }
  CMX_MUNGED_PID=$(_cmx_slurm_wait_pidfile "$w/munge/munged.pid" 10) ||
    { echo "cmx_slurm_start: munged wrote no PID" >&2; return 1; }
  _cmx_slurm_conf "$w" "$host"
  export SLURM_CONF="$w/slurm.conf"
  slurmctld -f "$SLURM_CONF" >>"$w/slurmctld.out" 2>&1 ||
    { echo "cmx_slurm_start: slurmctld failed; see $w/slurmctld.log" >&2; cmx_slurm_stop; return 1; }
  CMX_SLURMCTLD_PID=$(_cmx_slurm_wait_pidfile "$w/slurmctld.pid" 30) ||
    { echo "cmx_slurm_start: slurmctld wrote no PID; see $w/slurmctld.log" >&2; cmx_slurm_stop; return 1; }
  slurmd -f "$SLURM_CONF" -N "$host" >>"$w/slurmd.out" 2>&1 ||
    { echo "cmx_slurm_start: slurmd failed; see $w/slurmd.log" >&2; cmx_slurm_stop; return 1; }
  CMX_SLURMD_PID=$(_cmx_slurm_wait_pidfile "$w/slurmd.pid" 30) ||
    { echo "cmx_slurm_start: slurmd wrote no PID; see $w/slurmd.log" >&2; cmx_slurm_stop; return 1; }
  export CMX_MUNGED_PID CMX_SLURMCTLD_PID CMX_SLURMD_PID CMX_SLURM_WORK
  local i state
  for i in $(seq 1 300); do
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null)
    case "$state" in
      idle) return 0 ;;
      down*|drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 ;;
    esac
    sleep 0.1
  done
  echo "cmx_slurm_start: node $host not idle after 30 s (state '$state'; see $w/slurmd.log)" >&2
  cmx_slurm_stop
  return 1
}

_cmx_slurm_kill() {  # PID: stop it and wait until it is gone (daemons are not our children)
  local pid="$1" i
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
}

cmx_slurm_stop() {
  _cmx_slurm_kill "${CMX_SLURMD_PID:-}"
  _cmx_slurm_kill "${CMX_SLURMCTLD_PID:-}"
  _cmx_slurm_kill "${CMX_MUNGED_PID:-}"
  CMX_SLURMD_PID=""
  CMX_SLURMCTLD_PID=""
  CMX_MUNGED_PID=""
  unset SLURM_CONF
}
