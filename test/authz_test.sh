#!/usr/bin/env bash
# Authorization behind the gate: a process holding worker 0's certificate
# (test/tools/peer_probe.cpp) passes ps0's gate, then sends what only the
# coordinator may send, before and after its hello. ps0 refuses each one
# with not_authorized, logged with the sender, and keeps running; then the
# real worker and coordinator run the job to its end. Its data channels:
# past the cap per worker the oldest is closed; idle ones are closed (3 s
# here) and their threads end; a closed link opens its channel again.
# Case flood: 1,000 silent TCP connections per second at ps0's port, kept
# open 2 s each; a node with a certificate joins within 2 s all the same;
# then 500 slow ones per second (each sends a TLS record header and stops),
# and again.
# usage: authz_test.sh ACTORPS_BINARY PROBE_BINARY SOURCE_DIR [control|flood]
set -u
bin=$1
probe=$2
src=$3
case_name=${4:-control}
source "$(dirname "$0")/node_lib.sh" "authz.$case_name"

sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 60000, "data_idle_timeout_ms": 3000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
limit=3200
job=(--config "$tmp/job.json" --train-limit $limit --test-limit 500 --epochs 1
     --no-progress)

ps_port=$(free_port)
printf '{"cluster": {"chief": ["127.0.0.1:%s"], "worker": ["127.0.0.1:%s"], "ps": ["127.0.0.1:%s"]}}\n' \
  "$(free_port)" "$(free_port)" "$ps_port" >"$tmp/spec.json"
spec=(--cluster "$tmp/spec.json")
"$bin" certs --cluster "$tmp/spec.json" --out "$tmp/certs" >/dev/null

start_node ps0 "${job[@]}" "${spec[@]}" --role ps --index 0 --tls "$tmp/certs"
if ! wait_for_line "$tmp/ps0.log" "listening" 30; then
  bad "ps0 did not start: $(tail -3 "$tmp/ps0.log")"
  echo "$passed passed, $((failed)) failed"
  exit 1
fi

# flood_round KIND SECONDS RATE SETTLE: KIND (silent or slow) connections at
# ps0 for SECONDS at RATE per second; after SETTLE seconds worker 0 must join
# within 2 s; the flooder made them all; ps0 summarises the evictions of
# KIND peers. Prints how many the flooder made.
flood_round() {
  local kind=$1 seconds=$2 rate=$3 settle=$4
  "$probe" flood "127.0.0.1:$ps_port" "$seconds" "$rate" \
    $([[ $kind == slow ]] && echo slow) >"$tmp/$kind.log" 2>&1 &
  local flooder=$!
  pids+=($flooder)
  sleep "$settle" # the gate is full of such connections by now
  timeout 30 "$probe" join "$tmp/job.json" $limit 1 1 "$tmp/certs" worker 0 \
    "127.0.0.1:$ps_port" ps 0 >"$tmp/join-$kind.log" 2>&1
  local rc=$?
  local ms
  ms=$(grep -o 'joined in [0-9]*' "$tmp/join-$kind.log" | grep -o '[0-9]*$')
  [[ $rc -eq 0 && -n $ms && $ms -lt 2000 ]] \
    && ok "worker 0 joined ps0 in $ms ms among $kind peers" \
    || bad "the join among $kind peers: exit $rc, $(cat "$tmp/join-$kind.log")"
  wait "$flooder"
  grep -q "^flood: [0-9]* $kind connections" "$tmp/$kind.log" \
    && ok "$(cat "$tmp/$kind.log")" || bad "the $kind flooder: $(cat "$tmp/$kind.log")"
  # Refusals are counted per cause and summarised, not dropped.
  wait_for_line "$tmp/ps0.log" "closed since the last summary: .*$kind while 64 connections waited" 15 \
    && ok "ps0: $(grep "closed since the last summary: .*$kind while" "$tmp/ps0.log" | head -1 | cut -c1-170)" \
    || bad "no $kind peers made room: $(grep 'gate' "$tmp/ps0.log" | tail -3)"
}

if [[ $case_name == flood ]]; then
  flood_round silent 8 1000 3
  made=$(grep -o '^flood: [0-9]*' "$tmp/silent.log" | grep -o '[0-9]*$')
  [[ ${made:-0} -ge 6000 ]] && ok "at least 750 connections per second" \
    || bad "only ${made:-0} connections in 8 s"
  # Slow peers: each sends the start of a TLS record and then nothing, so
  # none is silent; the oldest makes room, and a node still joins in time.
  flood_round slow 5 500 2
  kill -0 "$(cat "$tmp/ps0.pid")" 2>/dev/null && ok "ps0 still runs" \
    || bad "ps0 died: $(tail -3 "$tmp/ps0.log")"
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
  exit
fi

PEER_PID=$(cat "$tmp/ps0.pid") timeout 60 "$probe" "$tmp/job.json" $limit 1 1 \
  "$tmp/certs" worker 0 "127.0.0.1:$ps_port" ps 0 >"$tmp/probe.log" 2>&1
rc=$?
[[ $rc -eq 0 ]] && grep -q '^done$' "$tmp/probe.log" \
  && ok "the probe ran: $(grep -c . "$tmp/probe.log") lines" \
  || bad "the probe: exit $rc: $(tail -5 "$tmp/probe.log")"

# refused NAME: the probe's line NAME says not_authorized.
refused() {
  grep -q "^$1: refused: .*not_authorized" "$tmp/probe.log" \
    && ok "$1: $(grep "^$1:" "$tmp/probe.log" | cut -c1-150)" \
    || bad "$1 was not refused as not authorized: $(grep "^$1:" "$tmp/probe.log")"
}
for m in "shutdown before hello" "ping before hello" "shutdown after hello" \
         "stats" "save" "restore" "configure" "pull as another worker"; do
  refused "$m"
done
grep -q '^hello naming a chief: refused: .*named itself the coordinator' "$tmp/probe.log" \
  && ok "a worker naming a chief in its hello: $(grep '^hello naming' "$tmp/probe.log" | cut -c1-150)" \
  || bad "hello naming a chief: $(grep '^hello naming' "$tmp/probe.log")"
grep -q '^hello: answered' "$tmp/probe.log" && ok "its own hello is admitted" \
  || bad "hello: $(grep '^hello:' "$tmp/probe.log")"
refused "data-channel pull as another worker"
# One ps: a worker may hold 2 channels to it (one per group it may serve,
# plus one for a reconnect); each one past that closes the oldest, and a
# link whose channel was closed while idle opens it again when used.
grep -q 'worker0 opened another data channel; its oldest is closed (2 at most per worker and server)' "$tmp/ps0.log" \
  && ok "past 2 data channels of worker 0, the oldest closed: $(grep -c 'worker0 opened another' "$tmp/ps0.log") times" \
  || bad "more data channels: $(grep 'another data channel' "$tmp/ps0.log")"
# BASP connections per peer are capped (8): the probe's own, 7 more, then
# a refusal naming the cap; the real worker joins later all the same (the
# probe's closed connections are counted down).
grep -q '^BASP connections: 7 more admitted, then refused: .*too many BASP connections of worker0: 8 open (at most 8 per peer)' "$tmp/probe.log" \
  && ok "$(grep '^BASP connections' "$tmp/probe.log" | cut -c1-160)" \
  || bad "BASP connections per peer: $(grep '^BASP connections' "$tmp/probe.log")"
# Idle channels (the probe's links never close their own): closed by ps0
# after data_idle_timeout_ms (3 s here), their threads gone.
idle=$(grep -c 'closing: idle for 3 s (no request)' "$tmp/ps0.log")
[[ $idle -ge 2 ]] && ok "ps0 closed $idle idle data channels" \
  || bad "idle data channels closed: $idle; $(grep 'idle' "$tmp/ps0.log" | tail -2)"
line=$(grep '^idle data channels:' "$tmp/probe.log")
read -r open_threads later_threads < <(sed -E 's/.*threads ([0-9]+) with them open, ([0-9]+) .*/\1 \2/' <<<"$line")
[[ -n $line && ${later_threads:-999} -le $((${open_threads:-0} - 2)) ]] \
  && ok "$line" || bad "the node's threads after the idle close: '$line'"
grep -q 'refused a pull over the data channel of worker0: in the name of worker 1' "$tmp/ps0.log" \
  && ok "ps0: $(grep -m1 -o 'refused a pull over the data channel.*' "$tmp/ps0.log")" \
  || bad "ps0 did not log the data-channel refusal: $(grep 'data' "$tmp/ps0.log" | tail -3)"
# What a worker may send is not refused for authorization (the pull fails
# for want of shards: no coordinator has created any yet).
for m in "ping after hello" "ps ping" "pull as itself" "pull as no worker" \
         "data-channel pull as no worker" \
         "data-channel pull as itself" "newest data channel pull as itself" \
         "first data channel pull after it was closed" \
         "pull after the idle close"; do
  line=$(grep "^$m:" "$tmp/probe.log")
  [[ -n $line && $line != *not_authorized* && $line != *disconnected* \
     && $line != *timeout* ]] && ok "$m is allowed: $line" \
    || bad "$m: '$line'"
done
# ps0 logged every refusal with the sender, and is still running (no
# SIGKILL, no SIGSTOP, no shutdown).
for what in "a shutdown from an anonymous sender\|a shutdown from node" \
            "a kill from" "a freeze from" "a stats request" "a save request" \
            "a pull request .*in the name of worker 1"; do
  grep -q "refused $what" "$tmp/ps0.log" \
    && ok "ps0: $(grep -m1 "refused $what" "$tmp/ps0.log" | cut -c1-170)" \
    || bad "ps0 does not say 'refused $what': $(grep refused "$tmp/ps0.log" | head -3)"
done
grep -q "fault injection: SIGKILL\|fault injection: SIGSTOP\|shutting down" "$tmp/ps0.log" \
  && bad "ps0 obeyed: $(grep 'fault injection\|shutting down' "$tmp/ps0.log")" \
  || ok "ps0 obeyed none of them"
sleep 0.5
state=$(ps -o stat= -p "$(cat "$tmp/ps0.pid")" 2>/dev/null)
[[ -n $state && $state != T* ]] && ok "ps0 still runs (state $state)" \
  || bad "ps0 is gone or stopped (state '$state'): $(tail -3 "$tmp/ps0.log")"

# An oversized BASP header and an oversized data frame from the admitted
# peer: each connection closed before anything was allocated for it; ps0's
# peak memory grew by less than twice its dense region (235,146 floats:
# 940,584 bytes) while the probe sent them.
grep -q '^oversized BASP header: closed by the node' "$tmp/probe.log" \
  && grep -q 'closed the connection of .*a BASP client_handshake announcing 1073741824 bytes' "$tmp/ps0.log" \
  && ok "an oversized BASP header: $(grep -o 'closed the connection of .*client_handshake.*' "$tmp/ps0.log" | cut -c1-160)" \
  || bad "oversized BASP header: $(grep '^oversized' "$tmp/probe.log") / $(grep 'closed the connection' "$tmp/ps0.log")"
grep -q '^routed BASP message: closed by the node' "$tmp/probe.log" \
  && grep -q 'closed the connection of .*a BASP routed_message, which names its own sender' "$tmp/ps0.log" \
  && ok "a routed BASP message from a worker: $(grep -o 'closed the connection of .*routed_message.*' "$tmp/ps0.log" | cut -c1-160)" \
  || bad "routed BASP message: $(grep '^routed' "$tmp/probe.log") / $(grep 'closed the connection' "$tmp/ps0.log")"
grep -q '^oversized data frame: closed by the node' "$tmp/probe.log" \
  && grep -q 'closing: the peer sent a push frame announces 1073741824 bytes of bulk, more than the' "$tmp/ps0.log" \
  && ok "an oversized data frame: $(grep -o 'closing: the peer sent a push frame.*' "$tmp/ps0.log" | cut -c1-140)" \
  || bad "oversized data frame: $(grep '^oversized data' "$tmp/probe.log") / $(grep 'announces' "$tmp/ps0.log")"
line=$(grep '^peak RSS of the node' "$tmp/probe.log")
before=$(awk '{print $(NF-3)}' <<<"$line")
after=$(awk '{print $(NF-1)}' <<<"$line")
[[ ${before:-0} -gt 0 && -n $after && $((after - before)) -lt $((2 * 940584)) ]] \
  && ok "ps0's peak RSS grew by $((after - before)) bytes meanwhile ($line)" \
  || bad "ps0's peak RSS: $line"

# The job runs to its end on that ps: the real worker 0 takes its identity
# back (the probe's process is fenced), the coordinator joins.
start_node worker0 "${job[@]}" "${spec[@]}" --role worker --index 0 --tls "$tmp/certs"
wait_for_line "$tmp/worker0.log" "listening" 30
timeout 180 "$bin" node "${job[@]}" "${spec[@]}" --role coordinator \
  --tls "$tmp/certs" >"$tmp/chief.log" 2>&1
rc=$?
[[ $rc -eq 0 ]] && grep -q '^done: test_loss' "$tmp/chief.log" \
  && ok "then the job ran: $(grep '^done' "$tmp/chief.log" | cut -c1-90)" \
  || bad "the job: exit $rc, $(tail -5 "$tmp/chief.log")"
line=$(grep -o 'closures: [0-9]* scheduled, [0-9]* finished' "$tmp/chief.log" | head -1)
n1=$(echo "$line" | awk '{print $2}')
n2=$(echo "$line" | awk '{print $4}')
[[ -n $n1 && $n1 == "$n2" && $n1 -gt 0 ]] && ok "every closure finished: $line" \
  || bad "closure accounting: '$line' $(grep closures "$tmp/chief.log")"
grep -q 'worker 0 (incarnation [0-9]*) introduced itself from node .*fenced' "$tmp/ps0.log" \
  && ok "ps0: $(grep -m1 'introduced itself from' "$tmp/ps0.log" | cut -c1-170)" \
  || bad "ps0 did not say the probe was fenced: $(grep -i 'introduced\|fenced' "$tmp/ps0.log")"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
