#!/usr/bin/env bash
# A cluster across an emulated network (scripts/netns-cluster.sh): each node
# in a network namespace of its own with its own 10.77.0.x address, joined
# by veth pairs to a bridge, each link shaped with tc's tbf.
# usage: netns_test.sh ACTORPS_BINARY SOURCE_DIR CASE
# CASE:
#   job        2 ps + 2 workers on 1 Gbit/s links, a short Fashion-MNIST
#              job: exit 0, the nodes listened on their namespace addresses,
#              mutual TLS, every closure applied once per ps, nothing left
#              behind; the script's bad input (a link spec that does not
#              parse, latency without netem) and the leftovers of a killed
#              run (removed with a message naming them; those of a run still
#              going left alone); the script stopped with SIGTERM mid-job
#              removes everything too.
#   wire       the same job with --overlap, --push-format auto, --pull-format
#              auto and the first kernel in top-k: exit 0, each
#              worker logs its measurement, steps took values pulled ahead,
#              every closure applied once per ps, nothing left behind.
#   partition  worker 1's link down for 3 s mid-job (100 Mbit/s links, so
#              that the job's length depends on the network more than on
#              the CPU), pushes in pieces (--layer-pushes): the coordinator
#              reports worker1 lost, it joins again, the job exits 0, every
#              closure applied once per ps, nothing left behind.
# Needs root and network namespaces: not root, or `ip netns` not working,
# fails; a machine where no network namespace can be made at all (a
# container without CAP_SYS_ADMIN, decided by trying `unshare --net`) skips
# with status 77.
# shellcheck disable=SC2317 # finish exits; shellcheck takes what follows for unreachable
set -u
bin=$1
src=$2
case_name=$3
script=$src/scripts/netns-cluster.sh
tmp=$(mktemp -d)
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  # ACTORPS_TEST_LOGS=DIR keeps the outputs of a run for a post-mortem.
  if [[ -n ${ACTORPS_TEST_LOGS:-} ]]; then
    mkdir -p "$ACTORPS_TEST_LOGS/netns.$case_name.$$"
    cp "$tmp"/*.out "$ACTORPS_TEST_LOGS/netns.$case_name.$$/" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok [${SECONDS}s]: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED [${SECONDS}s]: $1"; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0 && passed > 0))
  exit
}

# -- can this machine make network namespaces? ---------------------------------

if [[ $(id -u) -ne 0 ]]; then
  bad "must run as root: scripts/netns-cluster.sh creates network namespaces, veth pairs and a bridge"
  finish
fi
for prog in ip tc unshare setpriv; do
  if ! command -v "$prog" >/dev/null; then
    bad "$prog is not installed (Debian: iproute2 for ip and tc, util-linux for unshare and setpriv)"
    finish
  fi
done
if ! why=$(unshare --net true 2>&1); then
  echo "SKIPPED: this machine cannot create a network namespace (unshare --net: ${why:-failed});" \
    "a container needs CAP_SYS_ADMIN and CAP_NET_ADMIN for this test"
  exit 77
fi
probe=nsprobe$$
if ! why=$(ip netns add "$probe" 2>&1); then
  bad "unshare --net works but 'ip netns add' does not: $why"
  finish
fi
ip netns del "$probe"
if ! why=$(ip link add "${probe}a" type veth peer name "${probe}b" 2>&1); then
  bad "network namespaces work but veth pairs cannot be made (CAP_NET_ADMIN?): $why"
  finish
fi
ip link del "${probe}a"

# -- helpers -------------------------------------------------------------------

sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 8000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
data_dir=$(grep -o '"dir": "[^"]*"' "$tmp/job.json" | head -1 | cut -d'"' -f4)
if [[ ! -f $data_dir/train-images-idx3-ubyte.gz ]]; then
  bad "no Fashion-MNIST in $data_dir (configs/fashion_mnist.json): scripts/setup.sh installs dataset-fashion-mnist"
  finish
fi
short=(--config "$tmp/job.json" --train-limit 3200 --test-limit 500 --epochs 1
       --no-progress)

# run_id OUT: the id the script named its run with (aps12345).
run_id() { grep -o '^\[netns\] run [a-z0-9]*:' "$1" | head -1 | awk '{print $3}' | tr -d :; }

# leftovers ID: the namespaces and links whose names carry ID, one line.
leftovers() {
  {
    ip netns list | awk '{print $1}' | grep "^$1-"
    ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep "^$1"
  } | tr '\n' ' '
}

# nothing_left NAME OUT: after the run of OUT, no namespace, link, node
# process or temporary folder of it is left.
nothing_left() {
  local id left procs
  id=$(run_id "$2")
  if [[ -z $id ]]; then
    bad "$1: the script did not say its run id: $(head -5 "$2")"
    return
  fi
  left=$(leftovers "$id")
  procs=$(pgrep -f "netns-cluster.sh.$id." | tr '\n' ' ')
  if [[ -z $left && -z $procs ]] && ! compgen -G "${TMPDIR:-/tmp}/netns-cluster.sh.$id.*" >/dev/null; then
    ok "$1: nothing of run $id left (namespaces, veths, bridge, processes, folder)"
  else
    bad "$1: run $id left: links/namespaces '$left', processes '$procs', $(compgen -G "${TMPDIR:-/tmp}/netns-cluster.sh.$id.*")"
  fi
}

# exactly_once OUT: the final counts say every finished closure's push was
# applied once on each of the 2 servers, and nothing was lost.
exactly_once() {
  local line scheduled finished applied
  line=$(grep -o 'closures: .*' "$1")
  scheduled=$(echo "$line" | awk '{print $2}')
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed 's/.*pushes: \([0-9]*\) applied.*/\1/')
  [[ -n $line && $scheduled == "$finished" && $applied == $((2 * finished)) ]] \
    && [[ $line != *lost* ]]
}

# wait_for_line FILE PATTERN SECONDS PID: whether a line matching PATTERN
# appears in FILE within SECONDS, while process PID runs.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# nodes_exited_0 NAME OUT: the 4 ps and worker processes exited with 0.
nodes_exited_0() {
  local n
  n=$(grep -c -E '^\[netns\] (ps[01]|worker[01]) exited with status 0$' "$2")
  if [[ $n -eq 4 ]]; then
    ok "$1: every ps and worker exited with status 0"
  else
    bad "$1: expected 4 nodes to exit 0, saw $n: $(grep '^\[netns\]' "$2" | tail -6)"
  fi
}

# -- cases ---------------------------------------------------------------------

case_job() {
  local out=$tmp/job.out rc
  # Bad input: clear errors, status 2, nothing made.
  "$script" --link fast -- "$bin" "${short[@]}" >"$tmp/bad.out" 2>&1
  rc=$?
  if [[ $rc -eq 2 ]] && grep -q "\-\-link 'fast' is not a rate" "$tmp/bad.out"; then
    ok "a link spec that does not parse: $(head -1 "$tmp/bad.out")"
  else
    bad "--link fast: exit $rc: $(cat "$tmp/bad.out")"
  fi
  "$script" --link 1gbit --latency 5 --tls off --prefix njob -- "$bin" "${short[@]}" \
    >"$tmp/latency.out" 2>&1
  rc=$?
  if [[ $rc -eq 2 ]] && grep -q 'cannot add latency (--latency 5): this kernel has no working netem' "$tmp/latency.out" \
     && ! grep -q '^\[coordinator\]' "$tmp/latency.out"; then
    ok "latency without netem: $(grep -o 'cannot add latency.*' "$tmp/latency.out" | cut -c1-120)..."
  elif [[ $rc -eq 0 ]] && grep -q 'netem delay 5 ms' "$tmp/latency.out"; then
    ok "this kernel has netem: the job ran with 5 ms of latency"
  else
    bad "--latency 5: exit $rc: $(cat "$tmp/latency.out")"
  fi

  # Leftovers of a killed run of prefix njob (its process id is gone): a
  # namespace with a process in it and the veth of a node, a bridge, a
  # loose veth pair and a temporary folder. And things of a run that still goes (a process whose
  # command line names the script), which must be left alone.
  local dead live stale_ns live_ns
  (exit 0) &
  dead=$!
  wait "$dead"
  stale_ns=njob$dead-worker0
  ip netns add "$stale_ns"
  ip link add "njob${dead}h3" type veth peer name eth0 netns "$stale_ns"
  ip link add "njob${dead}br" type bridge
  ip link add "njob${dead}h1" type veth peer name "njob${dead}t1"
  local stale_dir=${TMPDIR:-/tmp}/netns-cluster.sh.njob$dead.AbC123
  mkdir -m 700 "$stale_dir"
  echo '{}' >"$stale_dir/cluster.json"
  ip netns exec "$stale_ns" sleep 300 >/dev/null 2>&1 &
  local stale_sleep=$!
  bg_pids+=("$stale_sleep")
  (exec -a netns-cluster.sh sleep 300) >/dev/null 2>&1 &
  live=$!
  bg_pids+=("$live")
  live_ns=njob$live-ps0
  ip netns add "$live_ns"

  "$script" --link 1gbit --prefix njob --timeout 100 -- "$bin" "${short[@]}" >"$out" 2>&1
  rc=$?
  local removed=0 what
  # The loose veth pair goes with either of its ends.
  for what in "namespace $stale_ns" "link njob${dead}br" "link njob${dead}[ht]1" \
              "folder $stale_dir"; do
    if grep -q "^\[netns\] removing $what, left over from a run that did not clean up (process $dead is gone)" "$out"; then
      removed=$((removed + 1))
    else
      bad "leftover $what not removed with a message: $(grep '^\[netns\] \(removing\|leaving\)' "$out")"
    fi
  done
  ((removed == 4)) && ok "leftovers of a killed run removed, each named: $(grep -c '^\[netns\] removing' "$out") lines"
  if grep -q "^\[netns\] removing namespace $stale_ns.*killed the processes still in it" "$out"; then
    ok "the process left in a stale namespace was killed"
  else
    bad "the sleep in $stale_ns: $(grep "$stale_ns" "$out")"
  fi
  if [[ -z $(leftovers "njob$dead") && ! -e $stale_dir ]]; then
    ok "nothing of the killed run is left"
  else
    bad "of the killed run, still there: $(leftovers "njob$dead")"
  fi
  if grep -q "^\[netns\] leaving namespace $live_ns alone: it belongs to netns-cluster.sh process $live, still running" "$out" \
     && ip netns list | grep -q "^$live_ns"; then
    ok "the namespace of a run still going was left alone"
  else
    bad "the namespace of a live run: $(grep "$live_ns" "$out"), $(ip netns list | grep "$live_ns")"
  fi
  ip netns del "$live_ns" 2>/dev/null
  kill -KILL "$live" "$stale_sleep" 2>/dev/null
  wait "$live" "$stale_sleep" 2>/dev/null

  # The job.
  if [[ $rc -eq 0 ]] && grep -q '^\[coordinator\] done: test_loss' "$out"; then
    ok "the job across namespaces exits 0: $(grep -o 'done: .*' "$out")"
  else
    bad "the job: exit $rc: $(grep -v '^\[netns\] \(removing\|leaving\)' "$out" | tail -25)"
  fi
  local n
  n=$(grep -c -E '^\[(ps[01]|worker[01])\] info: listening on 10\.77\.0\.[0-9]+:7700 ' "$out")
  if [[ $n -eq 4 ]] && grep -q '"chief": \["10.77.0.10:7700"\]' "$out" \
     && grep -q '^\[coordinator\] info: every node joined' "$out"; then
    ok "each node listened on its own namespace address: $(grep -o 'listening on 10[.0-9:]*' "$out" | awk '{print $3}' | tr '\n' ' ')"
  else
    bad "expected 4 nodes listening on 10.77.0.x:7700, saw $n: $(grep -E 'listening|cluster spec' "$out")"
  fi
  n=$(grep -c -E '^\[netns\] (coordinator|ps[01]|worker[01]): 10\.77\.0\.[0-9]+:7700 in namespace njob[0-9]+-[a-z0-9]+, veth njob[0-9]+h[0-9]; tbf 10: root .*rate 1Gbit' "$out")
  if [[ $n -eq 5 ]]; then
    ok "5 namespaces, each link shaped by tbf to 1 Gbit/s"
  else
    bad "expected 5 nodes with a tbf of 1Gbit, saw $n: $(grep '^\[netns\]' "$out" | head -8)"
  fi
  # Namespaces are hosts as far as the job is concerned: no data channel
  # takes shared memory past its link (each ps declines a worker of
  # another network namespace).
  n=$(grep -c -E '^\[worker[01]\] info: worker [01] -> ps [01]: frames over TCP \(the peer declined shared memory' "$out")
  if [[ $n -eq 4 ]] && ! grep -q 'frames through shared memory' "$out"; then
    ok "the 4 data channels stay on the emulated network (no shared memory across namespaces)"
  else
    bad "data channels on TCP: $n of 4: $(grep -- '-> ps [01]: frames' "$out" | head -4)"
  fi
  n=$(grep -c -E '^\[(ps[01]|worker[01]|coordinator)\] info: TLS on: certificate' "$out")
  if [[ $n -eq 5 ]] && grep -q '^\[netns\] TLS: throw-away certificates' "$out"; then
    ok "mutual TLS with throw-away certificates on all 5 nodes"
  else
    bad "TLS on at $n nodes: $(grep -i tls "$out" | head -6)"
  fi
  if exactly_once "$out"; then
    ok "every closure applied once per ps: $(grep -o 'closures: .*' "$out")"
  else
    bad "counts: $(grep -o 'closures: .*' "$out")"
  fi
  nodes_exited_0 "job" "$out"
  nothing_left "job" "$out"

  # SIGTERM to the script mid-job: every node stopped, everything removed.
  local term=$tmp/term.out spid
  "$script" --link 1gbit --prefix njob --timeout 100 -- "$bin" "${short[@]}" \
    --epochs 50 >"$term" 2>&1 &
  spid=$!
  bg_pids+=("$spid")
  if ! wait_for_line "$term" '^\[coordinator\] info: every node joined' 60 "$spid"; then
    bad "SIGTERM: the job did not start: $(tail -5 "$term")"
    return
  fi
  kill -TERM "$spid"
  local i
  for ((i = 0; i < 150; i++)); do
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$spid" 2>/dev/null; then
    bad "SIGTERM: the script still runs 15 s after it"
    return
  fi
  wait "$spid"
  rc=$?
  if [[ $rc -eq 143 ]] && grep -q '^\[netns\] terminated (SIGTERM): stopping every node' "$term"; then
    ok "SIGTERM mid-job: the script stopped the job, exit $rc"
  else
    bad "SIGTERM: exit $rc: $(tail -5 "$term")"
  fi
  nothing_left "SIGTERM mid-job" "$term"
}

case_wire() {
  local out=$tmp/wire.out rc n
  "$script" --link 1gbit --prefix nwire --timeout 100 -- "$bin" "${short[@]}" \
    --overlap --push-format auto --pull-format auto \
    --variable-format dense_0/kernel=topk:0.05 >"$out" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q '^\[coordinator\] done: test_loss' "$out"; then
    ok "the job with overlap and formats by measurement exits 0: $(grep -o 'done: .*' "$out")"
  else
    bad "the wire job: exit $rc: $(grep -v '^\[netns\] \(removing\|leaving\)' "$out" | tail -25)"
  fi
  n=$(grep -c -E '^\[worker[01]\] info: wire format by measurement: .* ms in fp32 \(918 KB\) and .* ms in the candidate \(459 KB\), medians: (fp32|bf16) for pushes and pulls' "$out")
  if [[ $n -eq 2 ]]; then
    ok "each worker measured its links and chose: $(grep -o 'medians: [a-z0-9]*' "$out" | tr '\n' ' ')"
  else
    bad "expected 2 measurements, saw $n: $(grep -i 'wire format' "$out")"
  fi
  if grep -q -E '^\[coordinator\] overlap: [1-9][0-9]* of [0-9]+ dense pulls' "$out"; then
    ok "steps took values pulled ahead: $(grep -o 'overlap: .*' "$out")"
  else
    bad "no overlap line: $(tail -8 "$out")"
  fi
  if exactly_once "$out"; then
    ok "every closure applied once per ps: $(grep -o 'closures: .*' "$out")"
  else
    bad "counts: $(grep -o 'closures: .*' "$out")"
  fi
  nodes_exited_0 "wire" "$out"
  nothing_left "wire" "$out"
}

case_partition() {
  local out=$tmp/partition.out rc
  "$script" --link 100mbit --prefix npart --partition worker:1@3:3 --timeout 110 \
    -- "$bin" "${short[@]}" --train-limit 6400 --epochs 2 --layer-pushes \
    >"$out" 2>&1
  rc=$?
  if grep -q "^\[netns\] partition: worker1's link (npart[0-9]*h4) down at" "$out" \
     && grep -q "^\[netns\] partition: worker1's link (npart[0-9]*h4) up again after" "$out"; then
    ok "worker1's link went down and up: $(grep -o 'partition: .*' "$out" | tr '\n' ' ')"
  else
    bad "no partition: $(grep '^\[netns\]' "$out" | tail -8)"
  fi
  # The chief's lines: its coordinator's (cluster/topology/remote_cluster.cpp):
  # lost when CAF drops the connection (remote_link_unreachable) or after the
  # heartbeat timeout without an answer; back when its rejoin dial reaches it
  # again; and its dispatcher's ("worker 1 is back", actors/dispatcher_actor.cpp),
  # which netns-cluster.sh prefixes with the process's name, [coordinator], too.
  if grep -q '^\[coordinator\] error: lost worker1: ' "$out"; then
    ok "the coordinator reported worker1 lost: $(grep -o 'lost worker1: .*' "$out" | head -1)"
  else
    bad "worker1 not reported lost: $(grep -E '^\[coordinator\]' "$out" | tail -10)"
  fi
  if grep -q '^\[coordinator\] info: worker1 joined again (the same incarnation' "$out" \
     && grep -q '^\[coordinator\] info: worker 1 is back' "$out"; then
    ok "worker1 joined again when its link returned"
  else
    bad "worker1 did not join again: $(grep -E 'worker1|worker 1' "$out" | tail -10)"
  fi
  if [[ $rc -eq 0 ]] && grep -q '^\[coordinator\] epoch   2/2' "$out"; then
    ok "the job went on and exits 0: $(grep -o 'done: .*' "$out")"
  else
    bad "partitioned job: exit $rc: $(grep -v 'TLS on' "$out" | tail -25)"
  fi
  # With layer pushes, a push of the cut-off worker may have reached a
  # server in part: its closure, run again, completes it once.
  if exactly_once "$out" \
     && grep -q '^\[coordinator\] layer pushes: [1-9][0-9]* pieces' "$out"; then
    ok "no update lost or applied twice: $(grep -o 'closures: .*' "$out")"
  else
    bad "counts: $(grep -o 'closures: .*' "$out")"
  fi
  nodes_exited_0 "partition" "$out"
  nothing_left "partition" "$out"
}

"case_$case_name"
finish
