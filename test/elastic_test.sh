#!/usr/bin/env bash
# Workers joining and leaving a running job with dynamic data shards, and the
# exit code of each failure class (docs/reference/exit-codes.md).
# usage: elastic_test.sh ACTORPS_BINARY SOURCE_DIR CASE
# CASE: events | leave | join | exit_codes
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
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 8000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
short=(--config "$tmp/job.json" --train-limit 6400 --test-limit 1000
       --epochs 2 --no-progress)

# wait_exit PID SECONDS: sets $status to PID's exit status, or "timeout"
# (and kills it).
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

# wait_for_line FILE PATTERN SECONDS: whether a line matching PATTERN
# appears in FILE within SECONDS.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# once_per_epoch LOG: the summary says every example was trained once per
# epoch and no closure ran twice; prints the two lines.
once_per_epoch() {
  local data closures
  data=$(grep -o 'data: dynamic shards; .*' "$1")
  closures=$(grep -o 'closures: .*' "$1")
  echo "$data; $closures"
  [[ $data =~ ([0-9]+)\ examples\ trained\ of\ ([0-9]+)\ planned ]] \
    && [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] \
    && [[ $data == *"(each example once per epoch)"* ]]
}

case_events() {
  # In one process, from the event plan: two workers join, two leave, one
  # that joined is killed (and restarted): each example once per epoch.
  "$bin" train "${short[@]}" --sharding dynamic --fault join:worker@20 \
    --fault leave:worker:0@40 --fault join:worker@60 \
    --fault kill:worker:2@70 --fault leave:worker:3@120 >"$tmp/e.log" 2>&1
  local rc=$? line
  line=$(once_per_epoch "$tmp/e.log")
  if [[ $rc == 0 ]] && once_per_epoch "$tmp/e.log" >/dev/null \
     && grep -q 'worker 3 joined' "$tmp/e.log" \
     && grep -q 'worker 0 left after finishing its' "$tmp/e.log" \
     && grep -q 'worker 3 left after finishing its' "$tmp/e.log"; then
    ok "joins, leaves and a loss in one process: $line"
  else
    bad "events: exit $rc: $(grep -E 'join|left|lost|data:|failed|error' "$tmp/e.log" | tail -10)"
  fi
  # Bad input: static slices, sync mode, a leave of a worker that never was,
  # of a server that never was (leave:ps is the servers' event: a drain).
  local args expect
  for args in "--fault join:worker@20|data.sharding dynamic" \
              "--sharding dynamic --mode sync --fault join:worker@20|async job" \
              "--sharding dynamic --fault leave:worker:5@20|out of range" \
              "--sharding dynamic --fault leave:ps:5@20|ps 5 does not exist"; do
    expect=${args#*|}
    read -r -a argv <<<"${args%|*}"
    "$bin" train "${short[@]}" "${argv[@]}" >"$tmp/b.log" 2>&1
    rc=$?
    if [[ $rc == 2 ]] && grep -q -- "$expect" "$tmp/b.log"; then
      ok "refused (exit 2): $(grep -o 'error: .*' "$tmp/b.log" | cut -c1-150)"
    else
      bad "${args%|*}: exit $rc, expected 2 naming '$expect': $(tail -2 "$tmp/b.log")"
    fi
  done
}

case_leave() {
  # Under launch: worker1 gets SIGTERM mid-run; it finishes its closures,
  # leaves, exits 0 at once; the job goes on with worker0 and exits 0,
  # nothing re-executed, every example once per epoch.
  "$bin" launch "${short[@]}" --train-limit 25600 --epochs 4 --sharding dynamic \
    --workers 2 --ps 2 >"$tmp/l.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if ! wait_for_line "$tmp/l.log" "epoch   1/4" 60; then
    bad "leave: no first epoch: $(tail -5 "$tmp/l.log")"
    return
  fi
  local spec pid
  spec=$(grep -o 'cluster spec .*' "$tmp/l.log" | awk '{print $3}')
  pid=$(pgrep -f -- "node --role worker --index 1 --cluster $spec" | head -1)
  if [[ -z $pid ]]; then
    bad "leave: no process for worker1 ($spec)"
    return
  fi
  kill -TERM "$pid"
  local gone=no i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { gone=yes; break; }
    sleep 0.1
  done
  wait_exit "$launcher" 90
  local line reexec
  line=$(once_per_epoch "$tmp/l.log")
  reexec=$(grep -o 'closures: .*' "$tmp/l.log" | awk '{print $6}')
  if [[ $status == 0 && $gone == yes && $reexec == 0 ]] \
     && once_per_epoch "$tmp/l.log" >/dev/null \
     && grep -q '\[launch\] worker1 exited with status 0' "$tmp/l.log" \
     && grep -q 'worker1 left after finishing' "$tmp/l.log" \
     && ! grep -q 'lost worker' "$tmp/l.log"; then
    ok "worker1 left on SIGTERM (gone within $((i / 10)).$((i % 10)) s, exit 0), the job exit 0: $line"
  else
    bad "leave: job exit $status, worker1 gone: $gone, re-executed '$reexec': $(grep -E 'worker1|left|lost|closures|data:|exited' "$tmp/l.log" | tail -12)"
  fi
}

case_join() {
  # Under launch (2 ps, 2 workers, certificates for 3): worker 2 joins the
  # running job with `actorps node --join` at the coordinator's address,
  # takes closures, and ends with the job (exit 0); each example once per
  # epoch. Bad joins are refused with exit 2 while the job goes on.
  "$bin" certs --ps 2 --workers 3 --out "$tmp/certs" >/dev/null 2>&1
  "$bin" certs --ps 2 --workers 3 --out "$tmp/other" >/dev/null 2>&1
  local job=("${short[@]}" --train-limit 12800 --epochs 40 --sharding dynamic)
  "$bin" launch "${job[@]}" --workers 2 --ps 2 --tls "$tmp/certs" \
    >"$tmp/j.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  if ! wait_for_line "$tmp/j.log" "epoch   1/40" 60; then
    bad "join: no first epoch: $(tail -5 "$tmp/j.log")"
    return
  fi
  local spec chief rc
  spec=$(grep -o 'cluster spec .*' "$tmp/j.log" | awk '{print $3}')
  chief=$(grep -o '"chief":\["[^"]*"' "$spec" | cut -d'"' -f4)
  node=("$bin" node --role worker --cluster "$spec" "${job[@]}")
  # The good join first: command to the worker in service.
  local t0 t1
  t0=$(date +%s.%N)
  "${node[@]}" --index 2 --join "$chief" --tls "$tmp/certs" >"$tmp/w2.log" 2>&1 &
  local joiner=$!
  pids+=($joiner)
  if wait_for_line "$tmp/j.log" "worker2 joined the running job" 30; then
    t1=$(date +%s.%N)
    ok "worker 2 joined $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after its command"
  else
    bad "worker 2 did not join: $(tail -3 "$tmp/w2.log")"
  fi
  # Refused, each with exit 2, while the job goes on: another CA's
  # certificate, worker0's certificate claiming worker 3, an index of the
  # spec, an index in service, an address where no job runs.
  mkdir -p "$tmp/wrong"
  cp "$tmp/certs/ca.pem" "$tmp/wrong/"
  cp "$tmp/certs/worker0.pem" "$tmp/wrong/worker2.pem"
  cp "$tmp/certs/worker0.key" "$tmp/wrong/worker2.key"
  local cases=("other|2|--tls $tmp/other --join $chief|certificate"
               "wrong|2|--tls $tmp/wrong --join $chief|names worker0"
               "spec|1|--tls $tmp/certs --join $chief|is in .* already"
               "twice|2|--tls $tmp/certs --join $chief|worker 2 is in the job"
               "none|2|--tls $tmp/certs --join 127.0.0.1:1|no running job there")
  local c name idx args expect
  for c in "${cases[@]}"; do
    IFS='|' read -r name idx args expect <<<"$c"
    read -r -a argv <<<"$args"
    timeout 30 "${node[@]}" --index "$idx" "${argv[@]}" >"$tmp/$name.log" 2>&1 &
    pids+=($!)
    echo $! >"$tmp/$name.pid"
  done
  for c in "${cases[@]}"; do
    IFS='|' read -r name idx args expect <<<"$c"
    wait "$(cat "$tmp/$name.pid")"
    rc=$?
    if [[ $rc == 2 ]] && grep -q -- "$expect" "$tmp/$name.log"; then
      ok "join refused ($name): exit 2: $(grep -o 'error: .*' "$tmp/$name.log" | cut -c1-140)"
    else
      bad "join $name: exit $rc, expected 2 and '$expect': $(tail -2 "$tmp/$name.log")"
    fi
  done
  # The joined worker leaves as any worker does: SIGTERM, exit 0.
  kill -TERM "$joiner"
  wait_exit "$joiner" 30
  local joiner_status=$status
  wait_exit "$launcher" 90
  local job_status=$status
  status=$joiner_status
  grep -q 'left the job after finishing' "$tmp/w2.log" \
    && ok "the joined worker left on SIGTERM: $(grep -o 'left the job.*' "$tmp/w2.log")" \
    || bad "the joined worker did not leave: exit $joiner_status: $(tail -3 "$tmp/w2.log")"
  local line
  line=$(once_per_epoch "$tmp/j.log")
  if [[ $job_status == 0 && $status == 0 ]] && once_per_epoch "$tmp/j.log" >/dev/null \
     && grep -q 'worker 2: shm\|worker 2: tcp' "$tmp/j.log"; then
    ok "the job exit 0, worker 2 (joined, then left) exit 0 and ran closures: $line"
  else
    bad "join: job exit $job_status, worker 2 exit $status: $(grep -E 'worker2|worker 2|data:|closures|failed' "$tmp/j.log" | tail -8)"
  fi
}

# expect_code NAME CODE LOG: the command whose status is in $rc exited with
# CODE.
expect_code() {
  if [[ $rc == "$2" ]]; then
    ok "$1: exit $2 ($(grep -E 'error|failed|stopped|exited' "$3" | tail -1 | cut -c1-140))"
  else
    bad "$1: exit $rc, expected $2: $(tail -3 "$3")"
  fi
}

case_exit_codes() {
  "$bin" train "${short[@]}" --epochs 1 >"$tmp/ok.log" 2>&1
  rc=$?
  expect_code "success" 0 "$tmp/ok.log"
  "$bin" train "${short[@]}" --epochs 0 >"$tmp/bad.log" 2>&1
  rc=$?
  expect_code "a bad config (never retry)" 2 "$tmp/bad.log"
  "$bin" train "${short[@]}" --fault error:worker:1@10 >"$tmp/step.log" 2>&1
  rc=$?
  expect_code "a step error (a retry would repeat it)" 1 "$tmp/step.log"
  "$bin" train "${short[@]}" --fault kill:ps:1@30 >"$tmp/ps.log" 2>&1
  rc=$?
  expect_code "a ps lost without a checkpoint (a retry may help)" 128 "$tmp/ps.log"
  # A ps no coordinator joins: 128 (a port of its own, below the ephemeral
  # range; another program taking it first fails the case, rarely).
  local port=$((20000 + RANDOM % 10000))
  cat >"$tmp/spec.json" <<SPEC
{"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:$port"], "worker": ["127.0.0.1:2"]}}
SPEC
  sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 1000/' \
    "$tmp/job.json" >"$tmp/quick.json"
  timeout 30 "$bin" node --config "$tmp/quick.json" --cluster "$tmp/spec.json" \
    --role ps --index 0 --tls off --workers 1 --ps 1 >"$tmp/node.log" 2>&1
  rc=$?
  expect_code "a node no coordinator joins (a retry may help)" 128 "$tmp/node.log"
  # Stopped on request: 75 with a checkpoint (requeue), 143 without.
  local extra
  for extra in "--checkpoint-dir $tmp/ck|75" "|143"; do
    read -r -a argv <<<"${extra%|*}"
    "$bin" train "${short[@]}" --epochs 50 "${argv[@]}" >"$tmp/stop.log" 2>&1 &
    local job=$!
    pids+=($job)
    wait_for_line "$tmp/stop.log" "epoch   1/50" 60
    kill -TERM "$job"
    wait_exit "$job" 60
    rc=$status
    expect_code "stopped on request ${extra%|*}" "${extra#*|}" "$tmp/stop.log"
  done
  # A failed job under launch: the coordinator's 1 is the job's, its ps and
  # workers exit 3 (not restarted).
  "$bin" launch "${short[@]}" --workers 2 --ps 1 --fault error:worker:1@10 \
    >"$tmp/launch.log" 2>&1
  rc=$?
  expect_code "launch of a job whose step fails" 1 "$tmp/launch.log"
  if grep -q '\[launch\] worker0 exited with status 3' "$tmp/launch.log" \
     && grep -q '\[launch\] ps0 exited with status 3' "$tmp/launch.log"; then
    ok "its ps and workers exit 3"
  else
    bad "nodes of a failed job: $(grep 'exited with' "$tmp/launch.log")"
  fi
}

"case_$case_name"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
