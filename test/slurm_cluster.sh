#!/usr/bin/env bash
# A one-node Slurm cluster for tests, of Debian's slurm-wlm (installed by
# scripts/setup.sh), in a temporary folder: munged with its own key and
# socket, slurmctld and slurmd on ports of their own, SLURM_CONF pointing at
# a slurm.conf there (node "localhost", loopback only). Sourced by
# test/slurm_test.sh, which sets `tmp` (the folder), `daemons` (their pids
# are added) and `bad`/`finish`. Everything the cluster runs carries
# ACTORPS_SLURM_TEST=$tmp in its environment, so that teardown finds it by
# pid; run as `slurm_cluster.sh --reap DIR OWNER_PID` it is the watchdog that
# tears the cluster down once OWNER_PID is gone (killed by ctest's timeout).

# -- teardown -----------------------------------------------------------------

# tagged_pids DIR: processes of this cluster: started with
# ACTORPS_SLURM_TEST=DIR in their environment (the daemons, the jobs' batch
# scripts and tasks, which inherit it), or working in DIR (slurmstepd, which
# works in the log folder).
tagged_pids() {
  {
    grep -lzxF "ACTORPS_SLURM_TEST=$1" /proc/[0-9]*/environ 2>/dev/null
    find /proc/[0-9]*/cwd -maxdepth 0 -lname "$1*" 2>/dev/null
  } | cut -d/ -f3 | sort -un | grep -vx -e "$$" -e "$BASHPID"
}

# job_pids DIR: tagged_pids without the daemons: what the jobs run.
job_pids() {
  local p
  for p in $(tagged_pids "$1"); do
    case $(cat "/proc/$p/comm" 2>/dev/null) in
      munged | slurmctld | slurmd | slurmscriptd | "") ;;
      *) echo "$p" ;;
    esac
  done
}

# teardown DIR: cancels the cluster's jobs, stops its daemons (SIGTERM, then
# SIGKILL), kills whatever else of it still runs, removes DIR.
teardown() {
  local dir=$1 pid i left
  [[ -d $dir ]] || return 0
  if [[ -f $dir/slurm.conf ]]; then
    SLURM_CONF=$dir/slurm.conf timeout 5 scancel --full --user="$(id -un)" \
      >/dev/null 2>&1
  fi
  for pid in $(cat "$dir"/*.pid 2>/dev/null); do
    kill -TERM "$pid" 2>/dev/null
  done
  for ((i = 0; i < 30; i++)); do
    left=$(tagged_pids "$dir")
    [[ -z $left ]] && break
    sleep 0.1
  done
  for pid in $(tagged_pids "$dir") $(cat "$dir"/*.pid 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null
  done
  # ACTORPS_TEST_KEEP=DIR keeps the jobs' output and the daemons' logs.
  if [[ -n ${ACTORPS_TEST_KEEP:-} ]]; then
    mkdir -p "$ACTORPS_TEST_KEEP"
    cp -r "$dir"/*.out "$dir"/*.sh "$dir"/log "$ACTORPS_TEST_KEEP"/ 2>/dev/null
  fi
  rm -rf "$dir"
}

# -- ports --------------------------------------------------------------------

# free_port COUNT: a port p with p .. p+COUNT-1 free on 127.0.0.1 (checked by
# connecting), below the kernel's ephemeral range.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[[ ${ephemeral_low:-0} -gt 12000 ]] || ephemeral_low=32768
used_ports=" "
free_port() {
  local count=$1 p k busy
  while :; do
    p=$((10000 + RANDOM % (ephemeral_low - 10000 - count)))
    busy=0
    for ((k = 0; k < count; k++)); do
      if [[ $used_ports == *" $((p + k)) "* ]] \
         || (exec 3<>"/dev/tcp/127.0.0.1/$((p + k))") 2>/dev/null; then
        busy=1
        break
      fi
    done
    if ((busy == 0)); then
      for ((k = 0; k < count; k++)); do used_ports+="$((p + k)) "; done
      echo "$p"
      return
    fi
  done
}

# -- the cluster --------------------------------------------------------------

# in_cluster CMD...: runs CMD with this cluster's SLURM_CONF and tag.
in_cluster() {
  env SLURM_CONF="$tmp/slurm.conf" ACTORPS_SLURM_TEST="$tmp" "$@"
}

start_slurm() {
  mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
  chmod 711 "$tmp/munge"
  dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 600 "$tmp/munge/munge.key"
  local sock=$tmp/munge/munge.sock
  env SLURM_CONF="$tmp/slurm.conf" ACTORPS_SLURM_TEST="$tmp" munged -F -f --key-file="$tmp/munge/munge.key" --socket="$sock" \
    --pid-file="$tmp/munge/munged.pidfile" --log-file="$tmp/log/munged.log" \
    --seed-file="$tmp/munge/munged.seed" >/dev/null 2>&1 &
  echo $! >"$tmp/munged.pid"
  daemons+=($!)
  local i
  for ((i = 0; i < 100; i++)); do
    munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
    sleep 0.1
  done
  local ctld_port slurmd_port user
  ctld_port=$(free_port 1)
  slurmd_port=$(free_port 1)
  user=$(id -un)
  # CPUs=8 on a 2-core machine (config_overrides): five one-task job steps
  # fit. cred_expire=5 and sched_interval=1: a requeued job starts again in
  # seconds rather than Slurm's default two minutes.
  cat >"$tmp/slurm.conf" <<EOF
ClusterName=actorpstest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=5
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pidfile
SlurmdPidFile=$tmp/slurmd.pidfile
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  # Not through in_cluster: $! must be the daemon itself (env execs it).
  env SLURM_CONF="$tmp/slurm.conf" ACTORPS_SLURM_TEST="$tmp" slurmctld -D -i \
    >"$tmp/log/slurmctld.out" 2>&1 &
  echo $! >"$tmp/slurmctld.pid"
  daemons+=($!)
  env SLURM_CONF="$tmp/slurm.conf" ACTORPS_SLURM_TEST="$tmp" slurmd -D \
    -N localhost >"$tmp/log/slurmd.out" 2>&1 &
  echo $! >"$tmp/slurmd.pid"
  daemons+=($!)
  for ((i = 0; i < 300; i++)); do
    [[ $(in_cluster sinfo -h -o %T 2>/dev/null) == idle ]] && return 0
    sleep 0.1
  done
  bad "the Slurm cluster did not come up: $(tail -5 "$tmp/log/slurmctld.log" "$tmp/log/slurmd.log" "$tmp/log/slurmd.out" 2>&1)"
  finish
}

# job_state ID: the job's state (COMPLETED, RUNNING, ...).
job_state() {
  in_cluster scontrol show job "$1" -o 2>/dev/null \
    | grep -o 'JobState=[A-Z_]*' | cut -d= -f2
}

# wait_job ID SECONDS: waits until the job has ended for good; sets $state.
wait_job() {
  local id=$1 limit=$2 i
  for ((i = 0; i < limit * 5; i++)); do
    state=$(job_state "$id")
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return ;;
    esac
    sleep 0.2
  done
  state="still ${state:-unknown} after $limit s"
}

# wait_for_line FILE PATTERN SECONDS: whether a line matching PATTERN
# appeared in FILE within SECONDS.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# submit NAME -n TASKS [sbatch flags]: submits $tmp/NAME.sh, output to
# $tmp/NAME.out (appended over requeues); prints the job id.
submit() {
  local name=$1
  shift
  in_cluster sbatch --parsable --open-mode=append -o "$tmp/$name.out" \
    -J "$name" "$@" "$tmp/$name.sh"
}

if [[ ${BASH_SOURCE[0]} == "$0" && ${1:-} == --reap ]]; then
  # The watchdog: waits for the test script, then tears its cluster down if
  # the script could not (killed).
  while kill -0 "$3" 2>/dev/null; do sleep 1; done
  teardown "$2"
  exit 0
fi

