#!/usr/bin/env bash
# Multi-process clusters as a user runs them: `actorps launch`, and
# `actorps node` processes started one by one on 127.0.0.1.
# usage: cluster_test.sh ACTORPS_BINARY SOURCE_DIR CASE
# CASE: launch | fingerprint | garbage | heartbeat | bad_input | faults |
#       pause | pause_in_process | step_error | lost_ps | replication | move |
#       move_resume
set -u
bin=$1
src=$2
case_name=$3
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  # ACTORPS_TEST_LOGS=DIR keeps the nodes' logs of a run for a post-mortem.
  if [[ -n ${ACTORPS_TEST_LOGS:-} ]]; then
    mkdir -p "$ACTORPS_TEST_LOGS/$case_name.$$"
    cp "$tmp"/*.log "$ACTORPS_TEST_LOGS/$case_name.$$/" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() {
  failed=$((failed + 1))
  echo "FAILED: $1"
  [[ $1 == *"Address already in use"* ]] && port_clash=1
}

# A node that cannot listen on the port this script picked for it: another
# program took the port between free_port and the node's start.
port_clash=0

# A job config with short timeouts, so that failures show quickly.
write_job() {
  sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 8000/' \
    "$src/configs/fashion_mnist.json" >"$tmp/job.json"
}
write_job
short=(--config "$tmp/job.json" --train-limit 6400 --test-limit 1000
       --epochs 2 --no-progress)
# Mutual TLS, the default: certificates for up to 4 ps and 4 workers, which
# every node started here uses. `launch` gets them too, except in
# case_launch, where it makes throw-away ones of its own.
short_no_tls=("${short[@]}")
if ! "$bin" certs --ps 4 --workers 4 --out "$tmp/certs" >"$tmp/certs.out" 2>&1; then
  echo "FAILED: actorps certs: $(cat "$tmp/certs.out")"
  exit 1
fi
short+=(--tls "$tmp/certs")

# free_port: a port on 127.0.0.1 nobody listens on (checked by connecting),
# below the kernel's ephemeral range (ip_local_port_range), so that no
# outgoing connection or bind to port 0 (`actorps launch` picks its ports so)
# takes it before its node listens. Another run of this script may still
# pick the same port: the case then runs again (see the end).
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[[ ${ephemeral_low:-0} -gt 12000 ]] || ephemeral_low=32768
used_ports=" "
free_port() {
  local p
  while :; do
    p=$((10000 + RANDOM % (ephemeral_low - 10000)))
    [[ $used_ports == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      echo "$p"
      return
    fi
  done
}

# write_spec FILE WORKERS PS: a cluster spec with free ports; prints nothing.
write_spec() {
  local file=$1 workers=$2 ps=$3 i list
  {
    printf '{"cluster": {"chief": ["127.0.0.1:%s"], "worker": [' "$(free_port)"
    list=""
    for ((i = 0; i < workers; i++)); do list+="\"127.0.0.1:$(free_port)\","; done
    printf '%s], "ps": [' "${list%,}"
    list=""
    for ((i = 0; i < ps; i++)); do list+="\"127.0.0.1:$(free_port)\","; done
    printf '%s]}}\n' "${list%,}"
  } >"$file"
}

# port_of FILE ROLE INDEX
port_of() {
  grep -o "\"$2\": \[[^]]*\]" "$1" | grep -o '127.0.0.1:[0-9]*' \
    | sed -n "$(($3 + 1))p" | cut -d: -f2
}

# start_node NAME ARGS...: starts `actorps node ARGS` in the background,
# output in $tmp/NAME.log, pid in $tmp/NAME.pid.
start_node() {
  local name=$1
  shift
  "$bin" node "$@" >"$tmp/$name.log" 2>&1 &
  echo $! >"$tmp/$name.pid"
  pids+=($!)
}

# wait_exit PID SECONDS: waits for PID (a child of this shell) to end and
# sets $status to its exit status, or to "timeout" (and kills it) if it is
# still running after SECONDS.
wait_exit() {
  local pid=$1 limit=$2 i
  for ((i = 0; i < limit * 10; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      status=$?
      return
    fi
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  status=timeout
}

# wait_for_line FILE PATTERN SECONDS: seconds (with decimals) until a line
# matching PATTERN appears in FILE, or "never".
wait_for_line() {
  local file=$1 pattern=$2 limit=$3 t0 now
  t0=$(date +%s.%N)
  while :; do
    if grep -q -- "$pattern" "$file" 2>/dev/null; then
      now=$(date +%s.%N)
      awk -v a="$now" -v b="$t0" 'BEGIN { printf "%.2f\n", a - b }'
      return
    fi
    now=$(date +%s.%N)
    if awk -v a="$now" -v b="$t0" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then
      echo never
      return
    fi
    sleep 0.05
  done
}

# less_than X Y: whether X < Y (decimals).
less_than() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }

# train_loss FILE EPOCH: the train_loss of that epoch in a metrics file.
train_loss() {
  grep "\"epoch\":$2," "$1" | grep -o '"train_loss":[0-9.e+-]*' | cut -d: -f2
}

case_launch() {
  "$bin" launch "${short_no_tls[@]}" --workers 2 --ps 2 \
    --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    bad "launch exited with $rc: $(tail -20 "$tmp/out")"
    return
  fi
  ok "launch: 2 ps + 2 workers + coordinator exit 0"
  if grep -q '^\[launch\] CPUs (.*): ps0 .*worker1 ' "$tmp/out"; then
    ok "launch: says which CPUs each ps and worker runs on"
  else
    bad "launch: no line on the nodes' CPUs: $(head -3 "$tmp/out")"
  fi
  # Both ends of every data channel on this host: frames through shared
  # memory, as each worker says once per ps.
  local shm
  shm=$(grep -c '^\[worker[01]\] info: worker [01] -> ps [01]: frames through shared memory$' "$tmp/out")
  if [[ $shm -eq 4 ]]; then
    ok "launch: the 4 data channels move their frames through shared memory"
  else
    bad "launch: $shm of 4 data channels say shared memory: $(grep -- '-> ps' "$tmp/out" | head -4)"
  fi
  # The summary and the final JSON say which transport each link took.
  local links
  links=$(grep -o '"data_channels":{[^}]*}' "$tmp/m.jsonl" | tail -1)
  if grep -q '^\[coordinator\] data channels: 4 through shared memory, 0 over TCP (worker 0: shm, worker 1: shm)$' "$tmp/out" \
     && [[ $links == '"data_channels":{"per_worker":["shm","shm"],"shm":4,"tcp":0}' ]]; then
    ok "launch: the summary and the final JSON count 4 links through shared memory ($links)"
  else
    bad "launch: summary '$(grep 'data channels:' "$tmp/out")', JSON '$links'"
  fi
  # Prefetch is the default between processes, said once by the
  # coordinator, and its pulls were taken.
  if grep -q '^\[coordinator\] info: prefetch on (cluster.prefetch auto' "$tmp/out" \
     && grep -q '^\[coordinator\] prefetch: [1-9][0-9]* of [0-9]* dense pulls' "$tmp/out"; then
    ok "launch: prefetch on by default: $(grep -o 'prefetch: [0-9]* of [0-9]* dense pulls' "$tmp/out")"
  else
    bad "launch: prefetch not on by default: $(grep -i 'prefetch' "$tmp/out" | head -3)"
  fi
  # The servers are told to stop after the workers: no worker reports one
  # lost at the end of a job that succeeded.
  if grep -q "error: lost ps" "$tmp/out"; then
    bad "launch that succeeded: $(grep "error: lost ps" "$tmp/out" | head -2)"
  else
    ok "launch: no worker reports a server lost at the end"
  fi
  # A launcher SIGKILLed from outside takes its nodes with it.
  "$bin" launch "${short_no_tls[@]}" --workers 2 --ps 2 --epochs 50 \
    >"$tmp/killed.log" 2>&1 &
  local lpid=$!
  local i children=""
  for ((i = 0; i < 100; i++)); do
    children=$(pgrep -P "$lpid" | tr '\n' ' ')
    [[ $(wc -w <<<"$children") -ge 5 ]] && break
    sleep 0.1
  done
  # Every thread of every node runs as SCHED_BATCH (cluster.cpu_policy's
  # default; ps shows class B), once each node has applied it.
  local nodes classes=""
  nodes=$(pgrep -P "$lpid" -f ' node --role ' | tr '\n' ' ')
  for ((i = 0; i < 50; i++)); do
    classes=$(for c in $nodes; do ps -L -o cls= -p "$c"; done | tr -d ' ' \
                | sort -u | tr '\n' ' ')
    [[ $classes == "B " ]] && break
    sleep 0.1
  done
  if [[ $(wc -w <<<"$nodes") -ne 5 ]]; then
    bad "launch: expected 5 node processes, found '$nodes'"
  elif [[ $classes == "B " ]]; then
    ok "launch: every thread of the 5 nodes is scheduled SCHED_BATCH"
  else
    bad "launch: node threads scheduled as '$classes', not only B (SCHED_BATCH)"
  fi
  # cluster.cpu_affinity auto (the default): each ps and worker is started
  # with --cpu-set, and every one of its threads may run on those CPUs only;
  # the coordinator keeps all of the launcher's.
  local c set want got pinned=0 wrong=""
  local all
  all=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
  for c in $nodes; do
    set=$(tr '\0' ' ' <"/proc/$c/cmdline" | grep -o -- '--cpu-set [0-9,-]*' \
            | awk '{print $2}')
    if tr '\0' ' ' <"/proc/$c/cmdline" | grep -q -- '--role coordinator'; then
      want=$all
    else
      want=$set
      [[ -n $set ]] && pinned=$((pinned + 1))
    fi
    got=$(cat /proc/"$c"/task/*/status 2>/dev/null \
            | awk '/^Cpus_allowed_list/ {print $2}' | sort -u | tr '\n' ' ')
    [[ $got == "$want " ]] || wrong+=" pid $c: '$got' (want '$want')"
  done
  if [[ $pinned -eq 4 && -z $wrong ]]; then
    ok "launch: the 2 ps and 2 workers run on their --cpu-set, the coordinator on all CPUs"
  else
    bad "launch: $pinned of 4 nodes pinned;$wrong"
  fi
  kill -KILL "$lpid" 2>/dev/null
  wait "$lpid" 2>/dev/null
  local left=""
  for ((i = 0; i < 50; i++)); do
    left=""
    for c in $children; do kill -0 "$c" 2>/dev/null && left+="$c "; done
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -z $children ]]; then
    bad "launch started no nodes within 10 s: $(tail -5 "$tmp/killed.log")"
  elif [[ -z $left ]]; then
    ok "launch SIGKILLed: its $(wc -w <<<"$children") nodes are gone too"
  else
    bad "launch SIGKILLed, its nodes $left still run"
    for c in $left; do kill -KILL "$c" 2>/dev/null; done
  fi
  # ... and its cluster spec and throw-away certificates (private keys) do
  # not stay behind in the temporary folder (core/remove_after_exit.hpp).
  local spec certs gone=""
  spec=$(grep -o '/[^ ]*/actorps-cluster-[A-Za-z0-9]*\.json' "$tmp/killed.log" | head -1)
  certs=$(grep -o '/[^ ]*/actorps-tls-[A-Za-z0-9]*' "$tmp/killed.log" | head -1)
  for ((i = 0; i < 50; i++)); do
    [[ -e $spec || -e $certs ]] || { gone=1; break; }
    sleep 0.1
  done
  if [[ -z $spec || -z $certs ]]; then
    bad "launch SIGKILLed: its log names no cluster spec or certificates: $(head -3 "$tmp/killed.log")"
  elif [[ -n $gone ]]; then
    ok "launch SIGKILLed: its cluster spec and certificates are removed"
  else
    bad "launch SIGKILLed: left behind $(ls -d "$spec" "$certs" 2>/dev/null | tr '\n' ' ')"
  fi
  # TLS by default: throw-away certificates, and every node says so first.
  local t
  t=$(grep -c -E '^\[(ps[01]|worker[01]|coordinator)\] .*TLS on: certificate' "$tmp/out")
  if grep -q '^\[launch\] TLS: throw-away certificates' "$tmp/out" && [[ $t -eq 5 ]]; then
    ok "launch: mutual TLS with throw-away certificates on all 5 nodes"
  else
    bad "launch without TLS? $t nodes said 'TLS on': $(grep -i tls "$tmp/out" | head -5)"
  fi
  local n
  n=$(grep -c -E '^\[launch\] (ps[01]|worker[01]) exited with status 0$' "$tmp/out")
  if [[ $n -eq 4 ]]; then
    ok "every ps and worker process exited with status 0"
  else
    bad "expected 4 nodes to exit 0, saw $n: $(grep '^\[launch\]' "$tmp/out")"
  fi
  for prefix in '[coordinator] epoch   2/2' '[ps0] ' '[ps1] ' '[worker0] ' '[worker1] '; do
    if grep -qF -- "$prefix" "$tmp/out"; then
      ok "output prefixed: $prefix"
    else
      bad "no line starting with $prefix"
    fi
  done
  local l1 l2
  l1=$(train_loss "$tmp/m.jsonl" 1)
  l2=$(train_loss "$tmp/m.jsonl" 2)
  if [[ -n $l1 && -n $l2 ]] && less_than "$l2" "$l1"; then
    ok "loss falls: epoch 1 $l1, epoch 2 $l2"
  else
    bad "loss does not fall: '$l1' -> '$l2' ($(cat "$tmp/m.jsonl"))"
  fi
  # Pulls and pushes over CAF's BASP, as without the data channel, and in
  # pieces (layer pushes: pulls are not urgent across BASP, whose CAF 0.17
  # loses the answer to an urgent request).
  # With priority pulls: the slices' replies go out of the servers' snapshots
  # (BASP serialises them), and the forward pass starts on layer 0.
  # (And the kernel left to place the nodes: no --cpu-set, no CPUs line.)
  "$bin" launch "${short_no_tls[@]}" --workers 2 --ps 2 --data-channel off \
    --layer-pushes --priority-pulls --cpu-affinity none \
    --metrics-out "$tmp/b.jsonl" \
    >"$tmp/basp.out" 2>&1
  rc=$?
  l1=$(train_loss "$tmp/b.jsonl" 1)
  l2=$(train_loss "$tmp/b.jsonl" 2)
  if [[ $rc -eq 0 && -n $l1 && -n $l2 ]] && less_than "$l2" "$l1" \
     && grep -q '^\[coordinator\] layer pushes: [1-9][0-9]* pieces' "$tmp/basp.out" \
     && grep -q "^\\[coordinator\\] priority pulls: [1-9][0-9]* forward layers ran before" "$tmp/basp.out" \
     && ! grep -q '^\[launch\] CPUs' "$tmp/basp.out"; then
    ok "launch --data-channel off --layer-pushes --priority-pulls --cpu-affinity none: exit 0, loss $l1 -> $l2; $(grep -o 'priority pulls: .*' "$tmp/basp.out")"
  else
    bad "launch --data-channel off --layer-pushes: exit $rc, loss '$l1' -> '$l2': $(tail -5 "$tmp/basp.out")"
  fi
  # Over the data channel on TCP (no shared memory) with int8 pushes and
  # pulls and prefetch: the pulls sent right behind the pushes are taken,
  # every closure's push is applied once per server, and the loss falls.
  # With priority pulls: a step that pulls on its own (each worker's first
  # at least) pulls int8 slices and starts on layer 0.
  "$bin" launch "${short_no_tls[@]}" --workers 2 --ps 2 --prefetch \
    --priority-pulls \
    --push-format int8 --pull-format int8 --metrics-out "$tmp/p.jsonl" \
    --transport tcp >"$tmp/prefetch.out" 2>&1
  rc=$?
  l1=$(train_loss "$tmp/p.jsonl" 1)
  l2=$(train_loss "$tmp/p.jsonl" 2)
  local line
  line=$(grep -o 'closures: .*' "$tmp/prefetch.out" | tail -1)
  if [[ $rc -eq 0 && -n $l1 && -n $l2 ]] && less_than "$l2" "$l1" \
     && grep -q '^\[coordinator\] prefetch: [1-9][0-9]* of [0-9]* dense pulls' "$tmp/prefetch.out" \
     && grep -q "^\\[coordinator\\] priority pulls: [1-9][0-9]* forward layers ran before" "$tmp/prefetch.out" \
     && awk '{ exit !($2 == $4 && $(NF - 5) == 2 * $4) }' <<<"$line" \
     && [[ $(grep -c -- '-> ps [01]: frames over TCP (shared memory is off here)$' "$tmp/prefetch.out") -eq 4 ]]; then
    ok "launch --prefetch, int8 both ways, --transport tcp (4 channels on TCP): exit 0, loss $l1 -> $l2; $(grep -o 'prefetch: [0-9]* of [0-9]*' "$tmp/prefetch.out"); $line"
  else
    bad "launch --prefetch, int8: exit $rc, loss '$l1' -> '$l2', '$line': $(tail -5 "$tmp/prefetch.out")"
  fi
}

case_fingerprint() {
  write_spec "$tmp/spec.json" 1 1
  start_node ps0 "${short[@]}" --cluster "$tmp/spec.json" --role ps --index 0 \
    --optimizer sgd
  "$bin" node "${short[@]}" --cluster "$tmp/spec.json" --role coordinator \
    >"$tmp/chief.log" 2>&1
  local rc=$?
  if [[ $rc -eq 1 ]] && grep -q 'refused this chief: job optimizer: "sgd learning_rate 0.001" at ps0, "adam learning_rate 0.001 .*" at coordinator' "$tmp/chief.log"; then
    ok "coordinator refused with what differs: $(grep -o 'ps0 at.*' "$tmp/chief.log" | head -c 200)"
  else
    bad "coordinator: exit $rc, $(cat "$tmp/chief.log")"
  fi
  if grep -q 'refused chief 0: job optimizer: "sgd learning_rate 0.001" at ps0, "adam' "$tmp/ps0.log"; then
    ok "ps logged the refusal: $(grep -o 'refused.*' "$tmp/ps0.log" | head -c 200)"
  else
    bad "ps did not log the refusal: $(cat "$tmp/ps0.log")"
  fi
  local pid
  pid=$(cat "$tmp/ps0.pid")
  if kill -0 "$pid" 2>/dev/null; then
    ok "the ps keeps running after refusing a stranger"
  else
    bad "the ps exited after a refused handshake"
  fi
  # A worker of another job: refused by the ps too.
  "$bin" node "${short[@]}" --cluster "$tmp/spec.json" --role worker --index 0 \
    --mode sync >"$tmp/w.log" 2>&1
  rc=$?
  if [[ $rc -eq 1 ]] && grep -q 'job consistency: "async" at ps0, "sync" at worker0' "$tmp/w.log"; then
    ok "a worker of another job is refused by the ps"
  else
    bad "worker: exit $rc, $(cat "$tmp/w.log")"
  fi
}

case_garbage() {
  write_spec "$tmp/spec.json" 1 1
  start_node ps0 "${short[@]}" --cluster "$tmp/spec.json" --role ps --index 0
  local port
  port=$(port_of "$tmp/spec.json" ps 0)
  wait_for_line "$tmp/ps0.log" "listening" 10 >/dev/null
  # Random bytes, a BASP header announcing a 4 GiB handshake, plain text.
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && head -c 65536 /dev/urandom >&3) 2>/dev/null
  (exec 3<>"/dev/tcp/127.0.0.1/$port" \
     && printf '\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff' >&3 \
     && sleep 0.3) 2>/dev/null
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET / HTTP/1.0\r\n\r\n' >&3) 2>/dev/null
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && sleep 2.5) 2>/dev/null # silent
  sleep 0.3
  local pid rss
  pid=$(cat "$tmp/ps0.pid")
  if kill -0 "$pid" 2>/dev/null; then
    ok "the ps survives garbage on its port"
  else
    bad "the ps died: $(cat "$tmp/ps0.log")"
    return
  fi
  rss=$(ps -o rss= -p "$pid")
  if [[ $rss -lt 500000 ]]; then
    ok "its memory stays small: ${rss} KiB"
  else
    bad "it holds ${rss} KiB after garbage"
  fi
  local n
  n=$(grep -c "closed a connection from" "$tmp/ps0.log")
  if [[ $n -ge 4 ]]; then
    ok "each garbage connection was closed and logged ($n)"
  else
    bad "expected 4 rejected connections in the log, saw $n: $(cat "$tmp/ps0.log")"
  fi
  # And the node still works: a whole job runs against it. The worker reads
  # its spec and task from TF_CONFIG, as TensorFlow users write it.
  TF_CONFIG="$(sed 's/}}$/}, "task": {"type": "worker", "index": 0}}/' "$tmp/spec.json")" \
    start_node worker0 "${short[@]}"
  "$bin" node "${short[@]}" --cluster "$tmp/spec.json" --role coordinator \
    >"$tmp/chief.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]] && grep -q '^done: test_loss' "$tmp/chief.log"; then
    ok "a job runs on the ps afterwards"
  else
    bad "job after garbage: exit $rc, $(tail -5 "$tmp/chief.log")"
  fi
  wait_exit "$pid" 10
  [[ $status == 0 ]] && ok "the ps exits 0 after the job" || bad "ps exit: $status"
}

case_heartbeat() {
  # A stopped worker: reported, its closure re-run elsewhere, the job ends.
  write_spec "$tmp/spec.json" 2 1
  start_node ps0 "${short[@]}" --cluster "$tmp/spec.json" --role ps --index 0
  start_node worker0 "${short[@]}" --cluster "$tmp/spec.json" --role worker --index 0
  start_node worker1 "${short[@]}" --cluster "$tmp/spec.json" --role worker --index 1
  start_node chief "${short[@]}" --cluster "$tmp/spec.json" --role coordinator \
    --epochs 4
  local chief w1 t rc
  chief=$(cat "$tmp/chief.pid")
  w1=$(cat "$tmp/worker1.pid")
  if [[ $(wait_for_line "$tmp/chief.log" "epoch   1/4" 60) == never ]]; then
    bad "no first epoch: $(cat "$tmp/chief.log")"
    return
  fi
  kill -STOP "$w1"
  t=$(wait_for_line "$tmp/chief.log" "lost worker1" 10)
  if [[ $t != never ]] && less_than "$t" 3; then
    ok "stopped worker reported after ${t} s"
  else
    bad "stopped worker not reported ($t): $(cat "$tmp/chief.log")"
  fi
  wait_exit "$chief" 60
  rc=$status
  if [[ $rc == 0 ]] && grep -q '^done: test_loss' "$tmp/chief.log"; then
    ok "the job finished on the other worker"
  else
    bad "chief with a stopped worker: $rc, $(tail -5 "$tmp/chief.log")"
  fi
  kill -KILL "$w1"

  # A stopped ps: reported, and the coordinator fails instead of hanging.
  write_spec "$tmp/spec2.json" 1 1
  start_node ps0b "${short[@]}" --cluster "$tmp/spec2.json" --role ps --index 0
  start_node worker0b "${short[@]}" --cluster "$tmp/spec2.json" --role worker --index 0
  start_node chiefb "${short[@]}" --cluster "$tmp/spec2.json" --role coordinator \
    --epochs 50
  chief=$(cat "$tmp/chiefb.pid")
  if [[ $(wait_for_line "$tmp/chiefb.log" "epoch   1/50" 60) == never ]]; then
    bad "no first epoch: $(cat "$tmp/chiefb.log")"
    return
  fi
  kill -STOP "$(cat "$tmp/ps0b.pid")"
  # Reported by the coordinator's own watch, or by the worker's first.
  t=$(wait_for_line "$tmp/chiefb.log" "lost ps0\|ps_lost" 10)
  if [[ $t != never ]] && less_than "$t" 3; then
    ok "stopped ps reported after ${t} s"
  else
    bad "stopped ps not reported ($t): $(cat "$tmp/chiefb.log")"
  fi
  wait_exit "$chief" 20
  rc=$status
  # A node lost and not recovered: a retry may help (exit 128).
  if [[ $rc == 128 ]] && grep -q 'ps_lost' "$tmp/chiefb.log"; then
    ok "the coordinator fails with the lost ps: $(grep -o 'failed:.*' "$tmp/chiefb.log" | head -c 200)"
  else
    bad "coordinator with a stopped ps: $rc, $(tail -5 "$tmp/chiefb.log")"
  fi
  wait_exit "$(cat "$tmp/worker0b.pid")" 10
  rc=$status
  # 3: stopped by the coordinator of a failed job (launch does not restart
  # it).
  if [[ $rc == 3 ]]; then
    ok "the worker shuts down with status 3 when the job fails"
  else
    bad "worker after the failed job: $rc, $(tail -3 "$tmp/worker0b.log")"
  fi
}

# expect_node_error NAME STATUS PATTERN ARGS...: `actorps node ARGS` exits
# with STATUS and says PATTERN on stderr.
expect_node_error() {
  local name=$1 status=$2 pattern=$3
  shift 3
  timeout 30 "$bin" node "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne $status ]]; then
    bad "$name: exit status $rc, expected $status ($(head -c 300 "$tmp/err"))"
  elif ! grep -q -- "$pattern" "$tmp/err"; then
    bad "$name: stderr does not mention '$pattern': $(cat "$tmp/err")"
  else
    ok "$name ($(tail -1 "$tmp/err" | head -c 200))"
  fi
}

case_bad_input() {
  write_spec "$tmp/spec.json" 1 1
  local spec=$tmp/spec.json
  expect_node_error "no spec at all" 2 "TF_CONFIG" "${short[@]}" --role ps
  TF_CONFIG='{"cluster": {"chief": ["127.0.0.1:1"]' expect_node_error \
    "malformed TF_CONFIG" 2 "TF_CONFIG: malformed JSON" "${short[@]}" --role ps
  TF_CONFIG="$(cat "$spec")" expect_node_error "TF_CONFIG without task" 2 \
    "no task" "${short[@]}"
  expect_node_error "unknown role" 2 'task.type' "${short[@]}" --cluster "$spec" \
    --role boss --index 0
  expect_node_error "index out of range" 2 'task.index' "${short[@]}" \
    --cluster "$spec" --role worker --index 3
  echo '{"cluster": {"chief": ["127.0.0.1:99999"], "worker": ["a:1"], "ps": ["b:2"]}}' >"$tmp/s1.json"
  expect_node_error "bad port" 2 'cluster.chief\[0\]' "${short[@]}" \
    --cluster "$tmp/s1.json" --role ps --index 0
  echo '{"cluster": {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:2"]}}' >"$tmp/s2.json"
  expect_node_error "duplicate address" 2 'h:2' "${short[@]}" \
    --cluster "$tmp/s2.json" --role ps --index 0
  expect_node_error "--workers against the spec" 2 '--workers: 3' "${short[@]}" \
    --cluster "$spec" --role ps --index 0 --workers 3
  # Unreachable nodes: the coordinator names each one after its timeout
  # (exit 128: another attempt may reach them).
  sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 1500/' \
    "$tmp/job.json" >"$tmp/quick.json"
  expect_node_error "unreachable nodes" 128 'could not reach within 1.5 s: ps0 at 127.0.0.1:[0-9]* (Connection refused), worker0 at' \
    "${short[@]}" --config "$tmp/quick.json" --cluster "$spec" --role coordinator
  # A port in use: the second ps cannot listen.
  start_node ps0 "${short[@]}" --cluster "$spec" --role ps --index 0
  wait_for_line "$tmp/ps0.log" "listening" 10 >/dev/null
  expect_node_error "port in use" 1 'cannot listen on 127.0.0.1:[0-9]*: Address already in use' \
    "${short[@]}" --cluster "$spec" --role ps --index 0
  # A node no coordinator joins gives up after the timeout, with status 128
  # (a retry may find one).
  expect_node_error "no coordinator" 128 'no coordinator joined within 1.5 s' \
    "${short[@]}" --config "$tmp/quick.json" --cluster "$tmp/spec.json" \
    --role worker --index 0
}

# exactly_once LOG: the final counts say every finished closure's push was
# applied once on each of the 2 servers, and nothing was lost.
exactly_once() {
  local line scheduled finished applied
  line=$(grep -o 'closures: .*' "$1")
  scheduled=$(echo "$line" | awk '{print $2}')
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  [[ -n $line && $scheduled == "$finished" && $applied == $((2 * finished)) ]]
}

# recovery_counts NAME LOG MAX_LOST: after a ps recovery, the pushes applied
# and those lost to the restore add up to one per closure and server (2
# servers), and at most MAX_LOST (a checkpoint interval) were lost.
recovery_counts() {
  local line finished applied lost
  line=$(grep -o 'closures: .*' "$2")
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  lost=$(echo "$line" | sed -n 's/.*, \([0-9]*\) lost to parameter-server recovery.*/\1/p')
  lost=${lost:-0}
  if [[ -n $line ]] && ((applied + lost == 2 * finished && lost <= $3)); then
    ok "$1: $applied applied + $lost lost = 2 x $finished closures"
  else
    bad "$1 counts: $line"
  fi
}

case_faults() {
  local job=("${short[@]}" --epochs 2)
  # One process: a worker killed twice comes back each time.
  "$bin" train "${job[@]}" --fault kill:worker:1@30 --fault kill:worker:1@120 \
    --fault stop:ps:1@60:0.3 >"$tmp/t.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]] && [[ $(grep -c 'worker 1 restarted' "$tmp/t.log") -ge 1 ]]; then
    ok "in-process: killed worker restarted, job done: $(grep -o 'closures: .*' "$tmp/t.log")"
  else
    bad "in-process kills: exit $rc: $(tail -8 "$tmp/t.log")"
  fi
  exactly_once "$tmp/t.log" && ok "in-process: every closure applied once per ps" \
    || bad "in-process counts: $(grep -o 'closures: .*' "$tmp/t.log")"
  # Dropped and delayed messages to the servers: resent after a timeout,
  # applied once.
  "$bin" train "${short[@]}" --train-limit 3200 --epochs 1 \
    --fault drop:ps:5%@5 --fault delay:ps:10%@5:0.02 >"$tmp/d.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'fault injection: drop:ps:5%@5' "$tmp/d.log" \
     && exactly_once "$tmp/d.log"; then
    ok "in-process: dropped and delayed messages, every closure applied once"
  else
    bad "drop/delay: exit $rc: $(tail -5 "$tmp/d.log")"
  fi
  # A killed ps is recovered from the newest checkpoint (every 20 steps):
  # dispatch pauses, the workers switch to the new server, the job goes on.
  # At most one checkpoint interval of its updates is lost, and the counts
  # account for every push.
  "$bin" train "${job[@]}" --checkpoint-dir "$tmp/ck" --checkpoint-every 20 \
    --fault kill:ps:0@30 >"$tmp/p.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'shards placed on ps 0 restored from .*ckpt-0000000020' "$tmp/p.log" \
     && grep -q 'dispatch resumed after a pause of' "$tmp/p.log"; then
    ok "in-process: killed ps recovered: $(grep -o 'ps 0 recovered.*' "$tmp/p.log")"
  else
    bad "in-process ps kill: exit $rc: $(tail -8 "$tmp/p.log")"
  fi
  recovery_counts "in-process ps recovery" "$tmp/p.log" 20
  # As processes: worker 1's process is SIGKILLed; worker 0 finishes the job.
  "$bin" launch "${job[@]}" --workers 2 --ps 2 --fault kill:worker:1@40 \
    >"$tmp/l.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q '^\[launch\] worker1 killed by signal 9' "$tmp/l.log" \
     && grep -q 'lost worker1' "$tmp/l.log"; then
    ok "launch: worker1 SIGKILLed, the job done on worker0"
  else
    bad "launch kill: exit $rc: $(tail -8 "$tmp/l.log")"
  fi
  exactly_once "$tmp/l.log" && ok "launch: every closure applied once per ps" \
    || bad "launch counts: $(grep -o 'closures: .*' "$tmp/l.log")"
  # Both workers killed: launch restarts each, they join again, the job goes
  # on (with none left, the queue waits for one to come back).
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 3 --workers 2 --ps 2 \
    --fault kill:worker:1@60 --fault kill:worker:0@300 >"$tmp/r.log" 2>&1
  rc=$?
  local back
  back=$(grep -c 'joined again' "$tmp/r.log")
  if [[ $rc -eq 0 ]] && [[ $(grep -c '^\[launch\] worker[01]: restarting' "$tmp/r.log") -eq 2 ]] \
     && [[ $back -ge 1 ]]; then
    ok "launch: killed workers restarted, $back joined again, job done"
    # A restarted worker process goes on at its last data position.
    if grep -q 'is back (restarted) and goes on at epoch' "$tmp/r.log"; then
      ok "a restarted worker went on at its data position: $(grep -o 'worker [01] is back (restarted).*' "$tmp/r.log" | head -1)"
    else
      bad "restarted workers not moved to their data positions: $(grep -E 'is back' "$tmp/r.log")"
    fi
  else
    bad "launch restarts: exit $rc: $(grep -E 'launch|again|back|failed' "$tmp/r.log" | tail -12)"
  fi
  exactly_once "$tmp/r.log" && ok "launch with restarts: every closure applied once per ps" \
    || bad "launch restart counts: $(grep -o 'closures: .*' "$tmp/r.log")"
  # A ps process killed: launch restarts it, the coordinator restores its
  # shards from the newest checkpoint, the workers switch, the job goes on.
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 2 --workers 2 --ps 2 \
    --checkpoint-dir "$tmp/lck" --checkpoint-every 40 \
    --fault kill:ps:1@100 >"$tmp/s.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'shards placed on ps 1 restored from .*ckpt-0000000080' "$tmp/s.log" \
     && grep -q 'group 1: ps1 serves it again, restored' "$tmp/s.log" \
     && grep -q 'dispatch resumed after a pause of' "$tmp/s.log" \
     && [[ $(grep -c 'group 1 is served by ps1' "$tmp/s.log") -eq 2 ]]; then
    ok "launch: killed ps recovered: $(grep -o 'dispatch resumed.*' "$tmp/s.log")"
  else
    bad "launch ps kill: exit $rc: $(grep -E 'launch|ps 1|ps1|failed' "$tmp/s.log" | tail -12)"
  fi
  recovery_counts "launch ps recovery" "$tmp/s.log" 40
  # The coordinator SIGKILLed: started again by hand with --resume, it joins
  # the running nodes (their shards kept) and continues from the newest
  # checkpoint; its closures are new ids, so nothing is discarded.
  write_spec "$tmp/cspec.json" 2 2
  local node_args=("${short[@]}" --train-limit 12800 --epochs 3
                   --cluster "$tmp/cspec.json" --checkpoint-dir "$tmp/cck"
                   --checkpoint-every 50)
  start_node cps0 "${node_args[@]}" --role ps --index 0
  start_node cps1 "${node_args[@]}" --role ps --index 1
  start_node cw0 "${node_args[@]}" --role worker --index 0
  start_node cw1 "${node_args[@]}" --role worker --index 1
  start_node chief1 "${node_args[@]}" --role coordinator
  if [[ $(wait_for_line "$tmp/chief1.log" "epoch   1/3" 60) == never ]]; then
    bad "first coordinator: $(tail -5 "$tmp/chief1.log")"
    return
  fi
  kill -KILL "$(cat "$tmp/chief1.pid")"
  "$bin" node "${node_args[@]}" --role coordinator --resume >"$tmp/chief2.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'already holds its 6 shards' "$tmp/chief2.log" \
     && grep -q 'resumed from .*: [01] epochs' "$tmp/chief2.log" \
     && grep -q '^epoch   3/3' "$tmp/chief2.log" \
     && grep -q '0 discarded as duplicates' "$tmp/chief2.log"; then
    ok "restarted coordinator resumed the running nodes: $(grep '^done' "$tmp/chief2.log")"
  else
    bad "restarted coordinator: exit $rc: $(tail -8 "$tmp/chief2.log")"
  fi
  local pid
  for n in cps0 cps1 cw0 cw1; do
    wait_exit "$(cat "$tmp/$n.pid")" 10
    [[ $status == 0 ]] || bad "$n after the restarted coordinator: $status"
  done
  # Under launch, a coordinator killed by a signal is restarted with
  # --resume and joins the running nodes.
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 3 --workers 2 --ps 2 \
    --checkpoint-dir "$tmp/lcr" --checkpoint-every 50 >"$tmp/lc.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if [[ $(wait_for_line "$tmp/lc.log" "epoch   1/3" 60) == never ]]; then
    bad "launch for the coordinator kill: $(tail -5 "$tmp/lc.log")"
    return
  fi
  pkill -KILL -f -- "--role coordinator .*--checkpoint-dir $tmp/lcr"
  wait_exit "$launcher" 60
  if [[ $status == 0 ]] && grep -q 'coordinator killed by signal 9 (SIGKILL); restarting' "$tmp/lc.log" \
     && grep -q 'resumed from' "$tmp/lc.log" && grep -q 'epoch   3/3' "$tmp/lc.log"; then
    ok "launch: killed coordinator restarted with --resume, job done"
  else
    bad "launch coordinator kill: exit $status: $(grep -E 'launch|resumed|failed|error' "$tmp/lc.log" | tail -10)"
  fi
}

# pause_run NAME ROLE INDEX: a launch job whose node ROLE INDEX is stopped
# from outside (SIGSTOP) for 3 s after its first epoch, then continued
# (SIGCONT): the job finishes (exit 0), every closure is applied once per ps
# and few are re-executed.
pause_run() {
  local name=$1 role=$2 index=$3 log="$tmp/$1.log"
  "$bin" launch "${short[@]}" --train-limit 25600 --epochs 12 --workers 2 \
    --ps 2 >"$log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if [[ $(wait_for_line "$log" "epoch   1/12" 60) == never ]]; then
    bad "$name: no first epoch: $(tail -5 "$log")"
    return
  fi
  local spec pid
  spec=$(grep -o 'cluster spec .*' "$log" | awk '{print $3}')
  pid=$(pgrep -f -- "node --role $role --index $index --cluster $spec" | head -1)
  if [[ -z $pid ]]; then
    bad "$name: no process for $role $index ($spec)"
    return
  fi
  pids+=($pid)
  kill -STOP "$pid"
  sleep 3
  kill -CONT "$pid"
  wait_exit "$launcher" 90
  local line reexec
  line=$(grep -o 'closures: .*' "$log")
  reexec=$(echo "$line" | awk '{print $6}')
  if [[ $status == 0 ]] && exactly_once "$log" && [[ -n $reexec ]] \
     && ((reexec < 10)); then
    ok "$name: exit 0, $line"
  else
    bad "$name: exit $status, '$line': $(grep -E 'lost|failed|error|back|again' "$log" | tail -12)"
  fi
}

case_pause() {
  pause_run "ps0 paused for 3 s" ps 0
  grep -q 'group 0: ps0 is back with its state: nothing restored' "$tmp/ps0 paused for 3 s.log" \
    && ok "the paused ps0 kept its state: nothing restored" \
    || bad "ps0 after the pause: $(grep -E 'ps0|ps 0' "$tmp/ps0 paused for 3 s.log" | tail -8)"
  pause_run "worker1 paused for 3 s" worker 1
  grep -qE 'worker1\] info: (reconnected to ps|group [01] is served by ps)' \
    "$tmp/worker1 paused for 3 s.log" \
    && ok "the paused worker1 reconnected to its servers" \
    || bad "worker1 after the pause: $(grep 'worker1' "$tmp/worker1 paused for 3 s.log" | tail -8)"
  pause_run "the coordinator paused for 3 s" coordinator 0
  grep -q 'the coordinator did not run for' "$tmp/the coordinator paused for 3 s.log" \
    && ok "the coordinator noticed its own pause" \
    || bad "coordinator pause not noticed"
}

case_pause_in_process() {
  # A stop longer than the heartbeat timeout (1 s) in one process: reported
  # (suspected, then not answering), then answering again; the job finishes
  # and every closure is applied once per ps.
  "$bin" train "${short[@]}" --epochs 2 --fault stop:ps:0@20:2 \
    --fault stop:worker:1@60:1.5 >"$tmp/i.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]] && exactly_once "$tmp/i.log" \
     && grep -q 'ps0 silent for .* suspected' "$tmp/i.log" \
     && grep -q 'ps0 has not answered for' "$tmp/i.log" \
     && grep -q 'ps0 answers again after' "$tmp/i.log" \
     && grep -q 'worker1 answers again after' "$tmp/i.log"; then
    ok "in-process stops reported and the job done: $(grep -o 'closures: .*' "$tmp/i.log")"
  else
    bad "in-process stops: exit $rc: $(grep -E 'ps0|worker1|closures' "$tmp/i.log" | tail -10)"
  fi
}

case_step_error() {
  # A step's own error (here injected: the worker's next step throws, as a
  # model would) is the closure's error, not a worker failure: it crosses
  # the wire as a typed error naming the worker, is not retried, the worker
  # is not lost or restarted, and the job fails once with it (exit 1).
  local expect='failed on worker 1: actorps::step_failed("worker 1", "the model", "injected step error'
  "$bin" train "${short[@]}" --fault error:worker:1@30 >"$tmp/e.log" 2>&1
  local rc=$?
  if [[ $rc -eq 1 ]] && grep -qF -- "$expect" "$tmp/e.log" \
     && ! grep -q 'worker 1 lost\|worker 1 restarted' "$tmp/e.log"; then
    ok "in-process: $(grep -o 'failed on worker 1.*' "$tmp/e.log" | head -1)"
  else
    bad "in-process step error: exit $rc: $(tail -6 "$tmp/e.log")"
  fi
  "$bin" launch "${short[@]}" --workers 2 --ps 2 --fault error:worker:1@30 \
    >"$tmp/l.log" 2>&1
  rc=$?
  if [[ $rc -eq 1 ]] && grep -qF -- "$expect" "$tmp/l.log" \
     && ! grep -q 'lost worker1\|restarting\|worker1 killed' "$tmp/l.log" \
     && grep -q '^\[launch\] worker1 exited with status 3$' "$tmp/l.log"; then
    ok "across processes: the typed error crossed the wire, worker1 stayed: $(grep -o '\[launch\] worker1 exited.*' "$tmp/l.log")"
  else
    bad "launch step error: exit $rc: $(grep -E 'error|failed|lost|launch' "$tmp/l.log" | tail -8)"
  fi
}

case_lost_ps() {
  # A lost ps whose state cannot be restored (no checkpoint) fails the job,
  # naming the server and its variables (as TensorFlow raises
  # UnavailableError); with cluster.reset_lost_ps it starts again from the
  # initial values and the job goes on.
  "$bin" train "${short[@]}" --fault kill:ps:1@30 >"$tmp/n.log" 2>&1
  local rc=$?
  if [[ $rc -eq 128 ]] && grep -q 'shards placed on ps 1 were lost (no live copy) and cannot be restored: no checkpoint_dir; their variables are lost: dense_0/kernel\[392:784)' "$tmp/n.log"; then
    ok "a lost ps without a checkpoint fails the job: $(grep -o 'ps 1 was lost.*' "$tmp/n.log" | head -1 | cut -c1-160)"
  else
    bad "lost ps without a checkpoint: exit $rc: $(tail -4 "$tmp/n.log")"
  fi
  sed 's/"reset_lost_ps": false/"reset_lost_ps": true/' "$tmp/job.json" >"$tmp/reset.json"
  "$bin" train --config "$tmp/reset.json" --train-limit 6400 --test-limit 1000 \
    --epochs 2 --no-progress --fault kill:ps:1@30 >"$tmp/r.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'they start again from the initial values (cluster.reset_lost_ps)' "$tmp/r.log"; then
    ok "with reset_lost_ps the lost ps starts again from the initial values: $(grep -o 'closures: .*' "$tmp/r.log")"
  else
    bad "reset_lost_ps: exit $rc: $(tail -4 "$tmp/r.log")"
  fi
}

# took_over_within NAME LOG GROUP: the backup of GROUP took over in < 1 s.
took_over_within() {
  local t
  t=$(grep -o "group $3: its backup ps[01] took over as primary (view [0-9]*) in [0-9.]* s" "$2" \
      | head -1 | awk '{print $(NF-1)}')
  if [[ -n $t ]] && less_than "$t" 1; then
    ok "$1: the backup of group $3 took over in $t s"
  else
    bad "$1: no takeover of group $3 within 1 s: $(grep -E 'took over|lost' "$2" | head -5)"
  fi
}

case_replication() {
  # cluster.replicas 1 under launch: each ps process is SIGKILLed from
  # outside in turn (ps0 once epoch 1 is done, ps1 once ps0 is the new
  # backup of both groups): each time the backup takes over within 1 s, the
  # workers switch, launch restarts the killed process and the new primary
  # copies its state to it; no update is lost or applied twice. Checkpoints
  # are on but never needed.
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 4 --workers 2 --ps 2 \
    --replicas 1 --checkpoint-dir "$tmp/rck" --checkpoint-every 1000 \
    >"$tmp/rl.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if [[ $(wait_for_line "$tmp/rl.log" "epoch   1/4" 90) == never ]]; then
    bad "replicated launch: no first epoch: $(tail -5 "$tmp/rl.log")"
    return
  fi
  pkill -KILL -f -- "--role ps --index 0 .*--checkpoint-dir $tmp/rck"
  if [[ $(wait_for_line "$tmp/rl.log" "group 1: ps0 is its new backup" 60) == never \
     || $(wait_for_line "$tmp/rl.log" "group 0: ps0 is its new backup" 10) == never ]]; then
    bad "ps0 not rebuilt as a backup: $(grep -E 'launch|ps 0|ps0|group' "$tmp/rl.log" | tail -10)"
  else
    ok "launch restarted ps0 and it became a backup again"
    pkill -KILL -f -- "--role ps --index 1 .*--checkpoint-dir $tmp/rck"
  fi
  wait_exit "$launcher" 150
  if [[ $status == 0 ]] && grep -q '^\[launch\] ps0 killed by signal 9' "$tmp/rl.log" \
     && grep -q '^\[launch\] ps1 killed by signal 9' "$tmp/rl.log" \
     && grep -q 'epoch   4/4' "$tmp/rl.log"; then
    ok "replicated launch: ps0 then ps1 SIGKILLed, job done: $(grep -o 'done: .*' "$tmp/rl.log")"
  else
    bad "replicated launch: exit $status: $(grep -v '^\[launch\] .*: \(ps\|worker\)' "$tmp/rl.log" | tail -40)"
  fi
  took_over_within "ps0 killed" "$tmp/rl.log" 0
  took_over_within "ps1 killed" "$tmp/rl.log" 1
  if grep -q 'restored from' "$tmp/rl.log"; then
    bad "a replicated group was restored from a checkpoint: $(grep 'restored from' "$tmp/rl.log")"
  fi
  exactly_once "$tmp/rl.log" \
    && ok "replicated launch: 0 lost, every closure applied once per ps: $(grep -o 'closures: .*' "$tmp/rl.log")" \
    || bad "replicated launch counts: $(grep -o 'closures: .*' "$tmp/rl.log")"
}

case_move() {
  # Planned changes of the servers under launch, 2 ps + 2 workers, no
  # replicas: ps2 joins in epoch 1 (launch started its process with the
  # others, idle until then), ps0's group moves to it (ps2 is its backup for
  # the move, then its primary), then ps1 leaves in epoch 2 (its group moves
  # to the server holding the fewest, ps0, and its process exits 0, not
  # restarted). Every closure's push is applied once per group (2 groups),
  # none lost, none re-executed.
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 3 --workers 2 --ps 2 \
    --fault join:ps@50 --fault 'move:ps:0>2@60' --fault leave:ps:1@260 \
    >"$tmp/ml.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  wait_exit "$launcher" 150
  if [[ $status == 0 ]] && grep -q 'epoch   3/3' "$tmp/ml.log"; then
    ok "launch with a join, a move and a leave: job done: $(grep -o 'done: .*' "$tmp/ml.log")"
  else
    bad "launch with moves: exit $status: $(grep -v '^\[launch\] .*: \(ps\|worker\)' "$tmp/ml.log" | tail -40)"
  fi
  local moved
  moved=$(grep -o 'group 0 moved from ps0 to ps2 (view [0-9]*): pushes to it waited [0-9.]* ms' "$tmp/ml.log" | head -1)
  [[ -n $moved ]] && grep -q 'ps 2 joined the job' "$tmp/ml.log" && ok "ps2 joined; $moved" \
    || bad "no move of group 0: $(grep -E 'group 0|move' "$tmp/ml.log" | head -10)"
  if grep -q 'group 1 moved from ps1 to ps0' "$tmp/ml.log" \
     && grep -q '^\[launch\] ps1 exited with status 0' "$tmp/ml.log" \
     && ! grep -q 'ps1: restarting' "$tmp/ml.log"; then
    ok "ps1 was drained (group 1 to ps0) and exited 0"
  else
    bad "ps1 not drained: $(grep -E 'ps1|ps 1|group 1' "$tmp/ml.log" | tail -10)"
  fi
  local line finished applied
  line=$(grep -o 'closures: .*' "$tmp/ml.log")
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  # A request that reached the old server after the group left it waits
  # for the new route (the worker does not fail its closure): nothing is
  # re-executed.
  if [[ -n $line && $applied == $((2 * finished)) && $line != *lost* \
        && $line == *" 0 re-executed"* ]]; then
    ok "moves under launch: 0 lost, 0 re-executed, every closure applied once per group: $line"
  else
    bad "moves under launch: counts: $line"
  fi
  # Six groups on 2 ps (cluster.groups): ps2 joins in epoch 1 and takes a
  # group of each (rebalanced: 2 primaries each); every closure's push is
  # applied once per group (6 groups).
  "$bin" launch "${short[@]}" --train-limit 12800 --epochs 2 --workers 2 --ps 2 \
    --groups 6 --fault join:ps@50 >"$tmp/mg.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_exit "$launcher" 150
  line=$(grep -o 'closures: .*' "$tmp/mg.log")
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  if [[ $status == 0 && -n $line && $applied == $((6 * finished)) \
        && $line != *lost* ]] \
     && grep -q 'rebalanced onto ps2: 2 group(s) moved; primaries per server: ps0 2, ps1 2, ps2 2' "$tmp/mg.log"; then
    ok "6 groups on 2 ps under launch: a joining ps took 2, each closure applied once per group: $line"
  else
    bad "6 groups under launch: exit $status: $line $(grep -E 'rebalanc|error' "$tmp/mg.log" | tail -10)"
  fi
}

case_move_resume() {
  # A coordinator killed after moves: launch starts it again with --resume,
  # and it asks the servers where the groups are instead of expecting group
  # g on ps g. ps2 joins, ps0 leaves (its group moves to ps2, its process
  # exits 0 and is not restarted); the coordinator is SIGKILLed after a
  # checkpoint taken after the leave. The restarted one does not expect
  # ps0, keeps group 0 on ps2, and the job ends: exit 0, every closure's
  # push applied once per group (2 groups), none lost.
  local log="$tmp/mr.log"
  "$bin" launch "${short[@]}" --train-limit 25600 --epochs 4 --workers 2 \
    --ps 2 --checkpoint-dir "$tmp/mrck" --checkpoint-every 50 \
    --fault join:ps@50 --fault leave:ps:0@60 >"$log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if [[ $(wait_for_line "$log" 'ckpt-0000000150' 90) == never ]]; then
    bad "move_resume: no checkpoint after the leave: $(tail -5 "$log")"
    return
  fi
  local child chief
  for child in $(pgrep -P "$launcher"); do pids+=("$child"); done
  chief=$(pgrep -f -- "--role coordinator .*--checkpoint-dir $tmp/mrck" | head -1)
  if [[ -z $chief ]] || ! grep -q 'ps 0 left the job' "$log"; then
    bad "move_resume: no coordinator to kill ($chief) or ps0 did not leave: $(grep -E 'group 0|ps 0' "$log" | tail -5)"
    return
  fi
  kill -KILL "$chief"
  wait_exit "$launcher" 150
  for child in $(pgrep -P "$launcher" 2>/dev/null); do pids+=("$child"); done
  if [[ $status == 0 ]] \
     && grep -q 'coordinator killed by signal 9 (SIGKILL); restarting' "$log" \
     && grep -q 'resumed from' "$log" && grep -q 'epoch   4/4' "$log"; then
    ok "move_resume: the killed coordinator was restarted with --resume, job done"
  else
    bad "move_resume: exit $status: $(grep -v '^\[launch\] .*: \(ps\|worker\)' "$log" | grep -E 'coordinator|launch' | tail -20)"
    return
  fi
  if grep -q 'ps0 does not answer within 3 s, and the other servers hold every group: it left the job' "$log" \
     && grep -q 'group 0: ps2 already holds it' "$log" \
     && grep -q 'group 1: ps1 already holds it' "$log" \
     && grep -q 'the groups stay where an earlier coordinator moved them' "$log" \
     && ! grep -q 'ps0: restarting' "$log"; then
    ok "move_resume: group 0 stayed on ps2, group 1 on ps1, ps0 (left) not expected"
  else
    bad "move_resume: placement: $(grep -E 'already holds|does not answer|ps0|group 0' "$log" | tail -10)"
  fi
  local line finished applied
  line=$(grep -o 'closures: .*' "$log" | tail -1)
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  if [[ -n $line && $applied == $((2 * finished)) && $line != *lost* ]]; then
    ok "move_resume: 0 lost, every closure applied once per group: $line"
  else
    bad "move_resume: counts: $line"
  fi
}

# clashed: whether a node of this script could not listen on its port
# (and the case did not expect that).
clashed() {
  ((port_clash)) \
    || grep -qs 'cannot listen on .*Address already in use' "$tmp"/*.log
}

"case_$case_name"
if ((failed > 0)) && clashed; then
  # Not a failure of actorps: run the case once more, on new ports.
  echo "a port this test picked was taken by another program before its" \
    "node could listen on it; running the case again on new ports"
  for p in "${pids[@]}"; do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  pids=()
  rm -rf "${tmp:?}"/*
  write_job
  passed=0
  failed=0
  port_clash=0
  "case_$case_name"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
