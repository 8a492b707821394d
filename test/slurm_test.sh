#!/usr/bin/env bash
# actorps under a real one-node Slurm cluster (test/slurm_cluster.sh: Debian's
# slurm-wlm in a temporary folder, munged with its own key and socket,
# slurmctld and slurmd on ports of their own, SLURM_CONF), as a user runs it.
# Cases:
#   resolver: `srun -n 5 actorps node --cluster-resolver slurm --ps 2` in an
#             sbatch script trains Fashion-MNIST (3 epochs, accuracy, every
#             push accounted for); SIGTERM to every task (scancel --signal,
#             as at the time limit) writes a checkpoint, exits 75, the batch
#             script requeues the job and the requeued job resumes to the
#             end; bad environments are refused with a clear error.
#   launcher: `actorps launch --launcher slurm` in an sbatch script trains the
#             same job while a worker's node process is killed with kill -9
#             and started again as a new job step; scancel of a running job
#             leaves no process behind.
#   join:     the job of `launch --launcher slurm --sharding dynamic` grows
#             by another job step, `srun -n 1 actorps node --role worker
#             --index 2 --join HOST:PORT --cluster SPEC`, started in the same
#             batch script while it trains: the joined worker trains
#             closures, the step and the job exit 0, each example once per
#             epoch.
# The daemons and every process of the cluster's jobs are stopped by pid when
# the script exits, also when it fails, and by a watchdog process when the
# script itself is killed (ctest's timeout).
# usage: slurm_test.sh ACTORPS_BINARY SOURCE_DIR CASE [TESTS_BINARY]
# (TESTS_BINARY, actorps_tests: resolver also checks the host-list parser
# against this cluster's `scontrol show hostnames`.)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=slurm_cluster.sh
source "$here/slurm_cluster.sh"

bin=$1
src=$2
case_name=$3
tests=${4:-}
tmp=$(mktemp -d /tmp/actorps-slurm-XXXXXX)
chmod 755 "$tmp"
daemons=()
# Not a bare `wait`: the watchdog below is a child too, and waits for us.
trap 'teardown "$tmp"; wait "${daemons[@]}" 2>/dev/null' EXIT
trap 'exit 1' INT TERM HUP
setsid bash "$here/slurm_cluster.sh" --reap "$tmp" "$$" </dev/null >/dev/null 2>&1 &

passed=0
failed=0
# Each line says when it was written (seconds since the start), to show where
# the time goes; nothing is asserted on it.
ok() { passed=$((passed + 1)); echo "ok [${SECONDS}s]: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED [${SECONDS}s]: $1"; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0 && passed > 0))
  exit
}

for prog in munged slurmctld slurmd srun sbatch scancel scontrol sinfo; do
  if ! command -v "$prog" >/dev/null; then
    bad "$prog is not installed: scripts/setup.sh installs slurm-wlm and munge"
    finish
  fi
done

# accounting NAME LOG: every closure finished, once per ps (2 servers).
accounting() {
  local line scheduled finished applied
  line=$(grep -o 'closures: .*' "$2" | tail -1)
  scheduled=$(echo "$line" | awk '{print $2}')
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  if [[ -n $line && $scheduled == "$finished" && $applied == $((2 * finished)) ]]; then
    ok "$1: $line"
  else
    bad "$1: accounting '$line'"
  fi
}

# accuracy NAME METRICS: the final test accuracy is at least 0.80. Three
# epochs of this asynchronous job end at 0.859-0.877 (12 runs of `launch`
# with worker 1 killed, beside a busy loop on the other core, 2026-11-27),
# but a clean-clone CI run, with other tests beside it, once ended at 0.830:
# the bound catches a job that diverged or lost its model (those end far
# below 0.8), not the spread of asynchronous training.
accuracy() {
  local acc
  acc=$(grep '"type":"final"' "$2" 2>/dev/null | grep -o '"test_accuracy":[0-9.]*' | cut -d: -f2)
  if [[ -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }'; then
    ok "$1: test accuracy $acc after 3 epochs"
  else
    bad "$1: test accuracy '${acc}' (want >= 0.80)"
  fi
}

# A job config with a short connect timeout, so that failures show quickly.
sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 10000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
job=(--config "$tmp/job.json" --epochs 3 --no-progress)
# Mutual TLS (the default): one CA and certificates for every node.
"$bin" certs --ps 2 --workers 2 --out "$tmp/certs" >/dev/null || exit 1
job+=(--tls "$tmp/certs")

# -- resolver: srun -n 5 actorps node --cluster-resolver slurm ----------------

case_resolver() {
  local port id n role
  port=$(free_port 5)
  cat >"$tmp/train.sh" <<EOF
#!/bin/bash
srun -n 5 "$bin" node --cluster-resolver slurm --ps 2 --port-base $port \
  ${job[*]} --metrics-out "$tmp/train.jsonl"
echo "srun exit \$?"
EOF
  id=$(submit train -n 5)
  wait_job "$id" 120
  if [[ $state == COMPLETED ]] && grep -q '^srun exit 0$' "$tmp/train.out"; then
    ok "srun -n 5 actorps node --cluster-resolver slurm: job $id completed, every task exit 0"
  else
    bad "srun job $id: $state: $(tail -15 "$tmp/train.out")"
  fi
  local where="coordinator localhost:$port; ps localhost:$((port + 1)), localhost:$((port + 2)); workers localhost:$((port + 3)), localhost:$((port + 4))"
  n=0
  for role in "coordinator 0" "ps 0" "ps 1" "worker 0" "worker 1"; do
    n=$((n + $(grep -cF "cluster from slurm: $where; this node: $role at" "$tmp/train.out")))
  done
  if [[ $n -eq 5 ]] && [[ $(grep -c 'cluster from slurm' "$tmp/train.out") -eq 5 ]]; then
    ok "each of the 5 tasks printed the cluster it derived once: $where"
  else
    bad "derived clusters: $(grep 'cluster from' "$tmp/train.out")"
  fi
  accuracy "srun -n 5" "$tmp/train.jsonl"
  accounting "srun -n 5" "$tmp/train.out"

  # SIGTERM to every task, as Slurm sends it at the time limit (--signal) or
  # on preemption: the coordinator checkpoints and exits 75, the batch script
  # requeues the job, and the requeued job resumes from the checkpoint.
  port=$(free_port 5)
  cat >"$tmp/requeue.sh" <<EOF
#!/bin/bash
#SBATCH --requeue
ckpt="$tmp/ckpt"
resume=()
if [ -n "\$(ls -A "\$ckpt" 2>/dev/null)" ]; then resume=(--resume); fi
echo "run \${SLURM_RESTART_COUNT:-0}:\${resume[*]}"
srun -n 5 "$bin" node --cluster-resolver slurm --ps 2 --port-base $port \
  ${job[*]} --checkpoint-dir "\$ckpt" --metrics-out "$tmp/requeue.jsonl" \
  "\${resume[@]}"
rc=\$?
echo "srun exit \$rc"
if [ \$rc -eq 75 ]; then scontrol requeue "\$SLURM_JOB_ID"; fi
exit \$rc
EOF
  id=$(submit requeue -n 5)
  if ! wait_for_line "$tmp/requeue.out" 'epoch   1/3' 60; then
    bad "requeue job $id: no first epoch: $(tail -10 "$tmp/requeue.out")"
    return
  fi
  # Into the second epoch (about 2 s), so that the stop cancels closures.
  sleep 0.5
  in_cluster scancel --signal=TERM "$id"
  if wait_for_line "$tmp/requeue.out" '^srun exit 75$' 30; then
    ok "SIGTERM to every task: $(grep -o 'stopped on request.*' "$tmp/requeue.out" | head -1); srun exit 75"
  else
    bad "after SIGTERM: $(grep -E 'stop|srun|exit|error' "$tmp/requeue.out" | tail -10)"
  fi
  wait_job "$id" 120
  local restarts
  restarts=$(in_cluster scontrol show job "$id" -o | grep -o 'Restarts=[0-9]*')
  if [[ $state == COMPLETED && $restarts == Restarts=1 ]] \
     && grep -q '^run 1:--resume$' "$tmp/requeue.out" \
     && grep -q '^srun exit 0$' "$tmp/requeue.out" \
     && grep -q 'resumed from' "$tmp/requeue.out"; then
    ok "requeued once (scontrol requeue on exit 75), resumed: $(grep -o 'resumed from.*' "$tmp/requeue.out" | head -1)"
  else
    bad "requeue job $id: $state $restarts: $(grep -E '^run|srun exit|resumed|error' "$tmp/requeue.out")"
  fi
  accuracy "stopped, requeued and resumed" "$tmp/requeue.jsonl"
  # 3 epochs of 936 closures, each pushing to 2 servers, over both runs.
  if grep -q 'since the start of the job: 2808 closures, 5616 pushes)' "$tmp/requeue.out"; then
    ok "over both runs: 2808 closures, 5616 pushes (one per closure and server)"
  else
    bad "job counts: $(grep -o 'closures: .*' "$tmp/requeue.out")"
  fi

  # The host-list parser against Slurm's own, on the same lists.
  if [[ -n $tests ]]; then
    if in_cluster "$tests" "[.scontrol]" >"$tmp/scontrol.log" 2>&1; then
      ok "expand_hostlist agrees with scontrol show hostnames: $(grep -o 'All tests passed.*' "$tmp/scontrol.log")"
    else
      bad "expand_hostlist and scontrol differ: $(tail -20 "$tmp/scontrol.log")"
    fi
  fi

  # Bad environments: a clear error, exit 2.
  local out rc
  out=$(env -i PATH="$PATH" HOME="${HOME:-/}" "$bin" node --cluster-resolver slurm \
    --ps 2 "${job[@]}" 2>&1)
  rc=$?
  if [[ $rc -eq 2 && $out == *"not inside a Slurm job (SLURM_PROCID is not set)"* ]]; then
    ok "outside Slurm: exit 2, ${out:0:120}"
  else
    bad "outside Slurm: exit $rc, $out"
  fi
  cat >"$tmp/nostep.sh" <<EOF
#!/bin/bash
"$bin" node --cluster-resolver slurm --ps 2 ${job[*]}
echo "node exit \$?"
srun -n 3 "$bin" node --cluster-resolver slurm --ps 2 ${job[*]}
echo "srun exit \$?"
srun -n 1 env SLURM_STEP_NODELIST='localhost[1-' "$bin" node \
  --cluster-resolver slurm --ps 2 ${job[*]}
echo "srun exit \$?"
EOF
  id=$(submit nostep -n 5)
  wait_job "$id" 60
  out=$(cat "$tmp/nostep.out")
  if [[ $out == *"in Slurm job $id but not in a job step (SLURM_STEP_NODELIST is not set)"*"node exit 2"* ]]; then
    ok "in a batch script without srun: exit 2, not in a job step"
  else
    bad "batch without srun: $out"
  fi
  if [[ $(grep -c 'error: --ps 2: the Slurm step has 3 tasks; task 0 is the coordinator, and 2 ps leave no task for a worker: give --ps at most 1' "$tmp/nostep.out") -eq 3 ]]; then
    ok "srun -n 3 with --ps 2: every task says why (give --ps at most 1)"
  else
    bad "srun -n 3 --ps 2: $out"
  fi
  if grep -q 'error: SLURM_STEP_NODELIST: bad Slurm host list "localhost\[1-"' "$tmp/nostep.out"; then
    ok "a host list that cannot be parsed: $(grep -o 'SLURM_STEP_NODELIST: bad.*' "$tmp/nostep.out" | head -1)"
  else
    bad "bad host list: $out"
  fi
}

# -- launcher: actorps launch --launcher slurm --------------------------------

case_launcher() {
  local port id pid
  port=$(free_port 10)
  cat >"$tmp/launch.sh" <<EOF
#!/bin/bash
"$bin" launch --launcher slurm --ps 2 --workers 2 --port-base $port \
  ${job[*]} --metrics-out "$tmp/launch.jsonl"
echo "launch exit \$?"
EOF
  id=$(submit launch -n 5)
  # worker 1's node process (the task of its job step), killed from outside
  # once it has trained a while: when the first epoch is reported, or 3 s
  # after the process appeared, whichever comes first. (Waiting for the
  # epoch line alone once found the job almost done under a loaded ctest:
  # the line was seen 19 s after the submission, the job ended at 22 s, and
  # worker 1 had already exited.)
  local seen=0 i=0 found=
  while [[ -z $found ]] && ((i++ < 300)); do
    for pid in $(tagged_pids "$tmp"); do
      if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null \
         | grep -q "^$bin node --role worker --index 1 "; then
        seen=$((seen + 1))
        if ((seen >= 15)) \
           || grep -q '\[coordinator\] epoch   1/3' "$tmp/launch.out"; then
          found=$pid
        fi
        break
      fi
    done
    [[ -n $found ]] || sleep 0.2
  done
  pid=$found
  if [[ -z $pid ]]; then
    bad "no process of worker 1 within 60 s: $(tail -10 "$tmp/launch.out")"
  else
    kill -9 "$pid"
    ok "killed worker 1's node process $pid with kill -9"
  fi
  wait_job "$id" 120
  if [[ $state == COMPLETED ]] && grep -q '^launch exit 0$' "$tmp/launch.out"; then
    ok "actorps launch --launcher slurm: job $id completed, exit 0"
  else
    bad "launch job $id: $state: $(grep -E 'launch|error|failed' "$tmp/launch.out" | tail -10)"
  fi
  if grep -q '^\[launch\] worker1 killed by signal 9 (SIGKILL)$' "$tmp/launch.out" \
     && grep -q '^\[launch\] worker1: restarting in .* (restart 1 of ' "$tmp/launch.out" \
     && [[ $(grep -c '^\[worker1\] .*listening on' "$tmp/launch.out") -eq 2 ]]; then
    ok "worker1 started again as a new job step: $(grep '^\[launch\] worker1' "$tmp/launch.out" | tr '\n' ' ')"
  else
    bad "worker1 restart: $(grep -E '^\[launch\]|worker1\] .*(listening|joined)' "$tmp/launch.out")"
  fi
  accuracy "launch --launcher slurm with a worker killed" "$tmp/launch.jsonl"
  accounting "launch --launcher slurm with a worker killed" "$tmp/launch.out"

  # The same job stopped as at a time limit (scancel --signal=TERM: every
  # step's task, not the batch script): the coordinator checkpoints, launch
  # exits 75; the batch script resumes it, and scancel then ends the job:
  # every node, srun, the launcher and slurmstepd end, nothing is left.
  port=$(free_port 10)
  cat >"$tmp/cancel.sh" <<EOF
#!/bin/bash
run() {
  "$bin" launch --launcher slurm --ps 2 --workers 2 --port-base $port \
    --config "$tmp/job.json" --epochs 100 --no-progress \
    --checkpoint-dir "$tmp/cancel-ckpt" "\$@"
  echo "launch exit \$?"
}
run
run --resume
EOF
  id=$(submit cancel -n 5)
  if ! wait_for_line "$tmp/cancel.out" '\[coordinator\] epoch   1/100' 60; then
    bad "cancel job $id: no first epoch: $(tail -10 "$tmp/cancel.out")"
    return
  fi
  in_cluster scancel --signal=TERM "$id"
  if wait_for_line "$tmp/cancel.out" '^launch exit 75$' 30; then
    ok "launch --launcher slurm, SIGTERM to every step: $(grep -o 'stopped on request.*' "$tmp/cancel.out" | head -1 | cut -c1-60)...; launch exit 75"
  else
    bad "after SIGTERM: $(grep -E 'stop|launch|error' "$tmp/cancel.out" | tail -10)"
  fi
  if ! wait_for_line "$tmp/cancel.out" '\[coordinator\] epoch   3/100' 60 \
     || ! grep -q '\[coordinator\] info: resumed from' "$tmp/cancel.out"; then
    bad "cancel job $id: no resumed run: $(tail -10 "$tmp/cancel.out")"
    return
  fi
  ok "launch --resume in the same job: $(grep -o 'resumed from.*' "$tmp/cancel.out" | cut -c1-90)"
  local before t0 left=x
  before=$(for p in $(job_pids "$tmp"); do
             tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -c "^$bin "
           done | awk '{s += $1} END {print s + 0}')
  t0=$(date +%s.%N)
  in_cluster scancel "$id"
  # Slurm sends SIGTERM, then SIGKILL after KillWait (5 s): 30 s bounds a
  # hang; it is no speed test (the time is reported).
  local deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    left=$(for p in $(job_pids "$tmp"); do
             echo "$p:$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)"
           done)
    [[ -z $left ]] && break
    sleep 0.1
  done
  local took
  took=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  if [[ -z $left && $before -eq 6 ]]; then
    ok "scancel: the launcher and its 5 nodes (with their srun and slurmstepd) all gone after $took s"
  else
    bad "scancel: $before actorps processes before; after $took s still: $left"
  fi
  wait_job "$id" 30
  if [[ $state == CANCELLED ]]; then
    ok "job $id: CANCELLED"
  else
    bad "job $id: $state"
  fi
}

# -- join: another job step joins the running job ------------------------------

case_join() {
  local port id
  port=$(free_port 10)
  # Certificates for the job's 2 workers and the one that joins.
  "$bin" certs --ps 2 --workers 3 --out "$tmp/certs3" >/dev/null || return
  # The sequence of docs/guide/slurm.md ("Growing a job"): launch in the
  # background, the spec of its cluster written once its coordinator takes
  # joins, then one more step. 6 tasks: 5 nodes and the one that joins.
  local flags="--config $tmp/job.json --epochs 4 --train-limit 25600 --no-progress --sharding dynamic --tls $tmp/certs3"
  cat >"$tmp/grow.sh" <<EOF
#!/bin/bash
"$bin" launch --launcher slurm --ps 2 --workers 2 --port-base $port $flags \\
  --checkpoint-dir "$tmp/grow-ckpt" >"$tmp/grow-launch.log" 2>&1 &
launcher=\$!
for i in \$(seq 600); do
  grep -q 'workers may join this job at' "$tmp/grow-launch.log" && break
  sleep 0.1
done
host=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -1)
cat >"$tmp/grow-spec.json" <<SPEC
{"cluster": {"chief": ["\$host:$port"],
             "ps": ["\$host:$((port + 1))", "\$host:$((port + 2))"],
             "worker": ["\$host:$((port + 3))", "\$host:$((port + 4))"]}}
SPEC
date +%s.%N >"$tmp/grow.t0"
srun -n 1 --exact --job-name=worker2 "$bin" node --role worker --index 2 \\
  --join "\$host:$port" --cluster "$tmp/grow-spec.json" $flags \\
  >"$tmp/grow-w2.log" 2>&1
echo "join step exit \$?"
wait \$launcher
echo "launch exit \$?"
EOF
  id=$(submit grow -n 6)
  local t1=
  if wait_for_line "$tmp/grow-launch.log" 'worker2 joined the running job' 90; then
    t1=$(date +%s.%N)
  fi
  wait_job "$id" 120
  local log=$tmp/grow-launch.log t0
  t0=$(cat "$tmp/grow.t0" 2>/dev/null)
  if [[ -n $t1 && -n $t0 ]]; then
    ok "worker 2 (srun ... actorps node --join) in service $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after its srun: $(grep -o 'worker2 joined.*' "$log")"
  else
    bad "worker 2 did not join: $(tail -5 "$tmp/grow-w2.log"; tail -5 "$log")"
  fi
  if [[ $state == COMPLETED ]] && grep -q '^join step exit 0$' "$tmp/grow.out" \
     && grep -q '^launch exit 0$' "$tmp/grow.out"; then
    ok "job $id completed: the joined step and launch exit 0"
  else
    bad "grow job $id: $state: $(cat "$tmp/grow.out"; grep -E 'error|failed' "$log" | tail -5)"
  fi
  local data
  data=$(grep -o 'data: dynamic shards; .*' "$log")
  if [[ $data =~ ([0-9]+)\ examples\ trained\ of\ ([0-9]+)\ planned ]] \
     && [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] \
     && [[ $data == *"(each example once per epoch)"* ]]; then
    ok "$data"
  else
    bad "accounting: '$data'; $(grep -o 'closures: .*' "$log")"
  fi
  # The last checkpoint's manifest keeps the end of the last range each
  # worker trained (both 0 for a worker that trained none).
  local manifest pos
  manifest=$(find "$tmp/grow-ckpt" -name manifest.json 2>/dev/null | sort | tail -1)
  pos=$(jq -c '.workers[2] // empty' "$manifest" 2>/dev/null)
  if [[ -n $pos && $pos != '{"epoch":0,"offset":0}' ]] \
     && grep -q 'joined the running job through the coordinator at' "$tmp/grow-w2.log"; then
    ok "worker 2 trained closures: its last range ended at $pos (${manifest#"$tmp"/})"
  else
    bad "worker 2 trained nothing: '$pos'; $(tail -3 "$tmp/grow-w2.log")"
  fi
}

start_slurm
echo "a one-node Slurm cluster is up [${SECONDS}s]: SLURM_CONF=$tmp/slurm.conf"
case $case_name in
  resolver) case_resolver ;;
  launcher) case_launcher ;;
  join) case_join ;;
  *) bad "unknown case $case_name" ;;
esac
finish
