#!/usr/bin/env bash
# actorps scale against a running launch (docs/guide/elasticity.md): the
# issue's sequence of workers and parameter servers coming and going, and
# the commands refused with their reason while the job goes on.
# usage: scale_test.sh ACTORPS_BINARY SOURCE_DIR CASE
# CASE: sequence | bad_input
set -u
bin=$1
src=$2
case_name=$3
tmp=$(mktemp -d)
# launch's private folders (and its scale socket) go here, so that a
# `scale` without --socket finds this test's job and no other.
export TMPDIR=$tmp
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -KILL "$p" 2>/dev/null # its nodes die with it (PDEATHSIG)
  done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

# wait_for_line FILE PATTERN SECONDS: whether a line matching PATTERN
# appears in FILE within SECONDS (false at once if launch has ended).
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# scale EXPECTED_RC ARGS...: runs actorps scale against the job, checks
# its exit status.
scale() {
  local want=$1
  shift
  "$bin" scale --socket "$sock" "$@" >"$tmp/scale.out" 2>&1
  local rc=$?
  if [[ $rc == "$want" ]]; then
    ok "scale $* -> exit $rc: $(tail -1 "$tmp/scale.out")"
  else
    bad "scale $* -> exit $rc, expected $want: $(cat "$tmp/scale.out")"
  fi
}

# start_launch LOG ARGS...: launch in the background; sets $sock.
start_launch() {
  local log=$1
  shift
  "$bin" launch --config "$src/configs/fashion_mnist.json" --no-progress \
    "$@" >"$log" 2>&1 &
  pids+=($!)
  if wait_for_line "$log" 'workers may join\|every node joined' 60 \
     && wait_for_line "$log" 'scale this job with' 5; then
    sock=$(grep -o -- '--socket [^ ]*' "$log" | head -1 | cut -d' ' -f2)
  else
    bad "launch did not start: $(tail -5 "$log")"
    sock=/nonexistent
  fi
}

# finished LOG: launch's exit status (waits up to 120 s).
finished() {
  local i
  for ((i = 0; i < 1200; i++)); do
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  wait "${pids[-1]}"
}

case_sequence() {
  # The issue's sequence: Fashion-MNIST, 2 ps + 2 workers, 6 epochs; 4
  # workers in epoch 2, 1 in epoch 4, then 2 again; a third ps in epoch 5
  # and ps 0 drained later in epoch 5. Six replica groups, so that the
  # third ps takes a share (2 of 6) and ps 0's two go to the others.
  local log=$tmp/seq.log
  start_launch "$log" --sharding dynamic --epochs 6 --max-ps 3 --groups 6
  wait_for_line "$log" 'epoch   1/6' 60 && scale 0 --workers 4
  wait_for_line "$log" 'epoch   3/6' 60 && scale 0 --workers 1
  scale 0 --workers 2
  wait_for_line "$log" 'epoch   4/6' 60 && scale 0 --ps 3
  sleep 0.3
  scale 0 --leave-ps 0
  finished
  local rc=$?
  [[ $rc == 0 ]] && ok "launch exit 0" || bad "launch exit $rc"
  grep -E 'epoch   [0-9]/6|scale:|moved from|left the job|joined;' "$log"
  local data closures done_line
  data=$(grep -o 'data: dynamic shards; .*' "$log")
  closures=$(grep -o 'closures: .*' "$log")
  done_line=$(grep -o 'done: .*' "$log")
  echo "$done_line"; echo "$data"; echo "$closures"
  if [[ $data =~ ([0-9]+)\ examples\ trained\ of\ ([0-9]+)\ planned ]] \
     && [[ ${BASH_REMATCH[1]} == 360000 && ${BASH_REMATCH[2]} == 360000 ]]; then
    ok "every example trained once per epoch (360000 of 360000)"
  else
    bad "examples: $data"
  fi
  # 0 updates lost, none applied twice: every closure's push applied once
  # per group (6 groups), none re-executed.
  if [[ $closures =~ ([0-9]+)\ scheduled,\ ([0-9]+)\ finished,\ 0\ re-executed\;\ pushes:\ ([0-9]+)\ applied,\ 0\ discarded ]] \
     && [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] \
     && (( BASH_REMATCH[3] == 6 * BASH_REMATCH[2] )); then
    ok "pushes = 6 groups x closures, 0 re-executed, 0 duplicates"
  else
    bad "closures and pushes: $closures"
  fi
  if [[ $done_line =~ test_accuracy\ ([0-9.]+) ]] \
     && awk -v a="${BASH_REMATCH[1]}" 'BEGIN { exit !(a >= 0.86) }'; then
    ok "test accuracy ${BASH_REMATCH[1]} >= 0.86"
  else
    bad "accuracy: $done_line"
  fi
  # samples/s before and after each of the five changes.
  local before after
  before=$(grep -c 'samples/s in the [0-9.]* s before' "$log")
  after=$(grep -c 'samples/s in the [0-9.]* s after' "$log")
  [[ $before == 5 && $after == 5 ]] \
    && ok "samples/s before and after each change (5 and 5)" \
    || bad "speed lines: $before before, $after after"
  grep -q 'rebalanced onto ps2: 2 group(s) moved; primaries per server: ps0 2, ps1 2, ps2 2' "$log" \
    && ok "ps2 took 2 of the 6 groups" || bad "no rebalance onto ps2"
  grep -q 'ps 0 left the job' "$log" \
    && grep -q 'ps0 exited with status 0' "$log" \
    && grep -q 'moves: 4 replica(s) of 6 groups moved' "$log" \
    && ok "ps 0 drained (its 2 groups moved) and exited 0" \
    || bad "ps 0 not drained: $(grep 'moves:' "$log")"
}

case_bad_input() {
  local log=$tmp/bad.log
  start_launch "$log" --sharding dynamic --epochs 40 --train-limit 6400 \
    --test-limit 1000 --max-ps 2
  scale 2 --workers 0
  scale 2 --ps 0
  scale 2 --ps 3            # no idle server left (--max-ps 2)
  scale 2 --leave-ps 7      # no such server
  scale 2 --workers 2       # as many as in service
  # Two commands at once: the second is refused while the first runs.
  "$bin" scale --socket "$sock" --workers 3 >"$tmp/first.out" 2>&1 &
  local first=$!
  sleep 0.1
  scale 2 --workers 4
  wait "$first"
  local rc=$?
  [[ $rc == 0 ]] && ok "the first of two commands done: $(tail -1 "$tmp/first.out")" \
    || bad "first command: exit $rc: $(cat "$tmp/first.out")"
  scale 0 --leave-ps 0
  scale 2 --leave-ps 1      # the last copy of the variables
  # Found without --socket: the one launch of this user in $TMPDIR.
  "$bin" scale --status >"$tmp/status.out" 2>&1 \
    && grep -q '3 worker(s) in service, 1 ps in service' "$tmp/status.out" \
    && ok "status without --socket: $(cat "$tmp/status.out")" \
    || bad "status: $(cat "$tmp/status.out")"
  # Another user cannot reach the socket (its folder is 0700).
  if command -v setpriv >/dev/null && [[ $(id -u) == 0 ]]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$bin" scale \
      --socket "$sock" --status >"$tmp/nobody.out" 2>&1
    local nrc=$?
    [[ $nrc == 2 ]] && grep -q 'Permission denied' "$tmp/nobody.out" \
      && ok "another user refused: $(cat "$tmp/nobody.out")" \
      || bad "another user: exit $nrc: $(cat "$tmp/nobody.out")"
  fi
  finished
  local rc2=$?
  [[ $rc2 == 0 ]] && ok "the job went on and ended with exit 0" \
    || bad "launch exit $rc2: $(tail -5 "$log")"
  grep -q '256000 examples trained of 256000 planned' "$log" \
    && ok "every example once per epoch" \
    || bad "$(grep 'data:' "$log")"
  # Without a job: refused, exit 2.
  "$bin" scale --socket "$tmp/none.sock" --workers 2 >"$tmp/none.out" 2>&1
  [[ $? == 2 ]] && ok "no job: $(cat "$tmp/none.out")" || bad "no job"
  "$bin" scale --workers many >"$tmp/flag.out" 2>&1
  [[ $? == 2 ]] && ok "bad count: $(head -1 "$tmp/flag.out")" || bad "bad count"
  # A job of static slices under sync: workers do not join or leave
  # (refused with the reason); a server joins (sync moves too).
  local log2=$tmp/static.log
  start_launch "$log2" --sharding static --mode sync --epochs 40 \
    --train-limit 6400 --test-limit 1000 --max-ps 3
  scale 2 --workers 3
  scale 2 --workers 1       # sync rounds count a fixed set of workers
  scale 0 --ps 3
  scale 0 --leave-ps 0
  kill -TERM "${pids[-1]}"
  finished
}

case_"$case_name"
echo "$passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]
