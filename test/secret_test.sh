#!/usr/bin/env bash
# One host without TLS: the job secret (cluster/net/job_secret.hpp). A
# `launch --tls off` job runs, its nodes holding the secret launch made;
# meanwhile a process of another user (nobody, through setpriv) tries
#  (a) to read the secret file: permission denied;
#  (b) to connect to ps0's port as a BASP peer (test/tools/peer_probe.cpp),
#      without a secret and with one of its own: refused with the secret's
#      reason, on its side and in ps0's log (root with the job's secret, as
#      a control, is admitted);
#  (c) to open worker 0's descriptors and its shared memory through /proc
#      (/proc/PID/fd/N, and /proc/PID/map_files/RANGE of the memfd, since
#      the worker closes the descriptor once the ps has opened the file):
#      permission denied (root, as a control, reads the segment's magic).
# The job then ends with exit 0 and its accuracy line: ps0 went on serving.
# Needs root (to start a process as nobody), setpriv and the user nobody;
# exits 77 (skipped) saying which is missing.
# usage: secret_test.sh ACTORPS_BINARY PROBE_BINARY SOURCE_DIR
set -u
bin=$1
probe=$2
src=$3

skip() {
  echo "SKIPPED: $1"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "not root: cannot start a process as another user"
command -v setpriv >/dev/null || skip "no setpriv (util-linux) to run a process as nobody"
id nobody >/dev/null 2>&1 || skip "no user nobody"
nobody_gid=$(id -g nobody)
as_nobody() { setpriv --reuid=nobody --regid="$nobody_gid" --clear-groups "$@"; }
as_nobody test -x "$probe" \
  || skip "nobody cannot run $probe (a folder above it is closed to others)"

source "$(dirname "$0")/node_lib.sh" "secret.other_user"
# nobody's own folder, for a secret of its own.
nb=$(mktemp -d)
chown nobody "$nb"
trap 'cleanup; rm -rf "$nb"' EXIT

sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 30000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
# Long enough for the probes (about 2 s), short for a test: 1 ps, 1 worker,
# 5 to 25 s. Not under `timeout`: the cleanup's SIGKILL must reach launch,
# which takes its nodes with it.
"$bin" launch --config "$tmp/job.json" --train-limit 12800 \
  --test-limit 1000 --epochs 12 --workers 1 --ps 1 --tls off --no-progress \
  >"$tmp/out.log" 2>&1 &
launcher=$!
pids+=($launcher)

# finish: the counts, and the launch's output when something failed.
finish() {
  ((failed > 0)) && { echo "--- launch output:"; tail -40 "$tmp/out.log"; }
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

if ! wait_for_line "$tmp/out.log" "frames through shared memory" 60; then
  bad "the job did not start its data channel: $(tail -5 "$tmp/out.log")"
  finish
fi
secret=$(sed -n 's/^\[launch\] tls off: a new job secret in \([^ ]*\) .*/\1/p' "$tmp/out.log")
port=$(sed -n 's/^\[ps0\] info: listening on [^ ]* (port \([0-9]*\)).*/\1/p' "$tmp/out.log")
worker=$(pgrep -P "$launcher" -f 'node --role worker --index 0' | head -1)
if [[ -z $secret || -z $port || -z $worker ]]; then
  bad "secret '$secret', ps0's port '$port', worker 0's pid '$worker' from: $(head -8 "$tmp/out.log")"
  finish
fi
ok "launch said: $(grep '^\[launch\] tls off' "$tmp/out.log" | cut -c1-120)"
grep -q '^\[ps0\] info: job secret: .*/secret (every peer proves' "$tmp/out.log" \
  && ok "ps0 holds it: $(grep -m1 '^\[ps0\] info: job secret' "$tmp/out.log")" \
  || bad "ps0 does not say it holds the job secret"
[[ $(stat -c %a "$secret") == 600 && $(stat -c %a "$(dirname "$secret")") == 700 ]] \
  && ok "the secret file is 0600 in a 0700 folder" \
  || bad "modes: file $(stat -c %a "$secret"), folder $(stat -c %a "$(dirname "$secret")")"

# (a) nobody reads the secret file.
out=$(as_nobody cat "$secret" 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *"Permission denied"* ]] \
  && ok "(a) nobody reading the secret: $out" \
  || bad "(a) nobody reading the secret: exit $rc, '$out'"

# (b) nobody at ps0's port: no secret, then one of its own.
out=$(as_nobody "$probe" secret "127.0.0.1:$port" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"refuses this connection: job secret wrong or missing: this node requires the job's secret and the dialer has none"* ]] \
  && ok "(b) nobody without a secret: $(cut -c1-150 <<<"$out")" \
  || bad "(b) nobody without a secret: exit $rc, '$out'"
as_nobody sh -c 'head -c 32 /dev/urandom >"$1/secret" && chmod 600 "$1/secret"' _ "$nb"
out=$(as_nobody "$probe" secret "127.0.0.1:$port" "$nb/secret" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"job secret wrong or missing: the dialer's proof does not match this node's secret"* ]] \
  && ok "(b) nobody with a secret of its own: $(cut -c1-150 <<<"$out")" \
  || bad "(b) nobody with a secret of its own: exit $rc, '$out'"
for why in "this node requires the job's secret and the dialer has none" \
           "the dialer's proof does not match this node's secret"; do
  wait_for_line "$tmp/out.log" "^\[ps0\] warning: ps 0: closed a connection from 127.0.0.1:[0-9]*: job secret wrong or missing: $why" 5 \
    && ok "ps0's log: $(grep -m1 "closed a connection from .*$why" "$tmp/out.log" | cut -c1-150)" \
    || bad "ps0 did not log '$why': $(grep '^\[ps0\] warning' "$tmp/out.log" | tail -3)"
done
out=$("$probe" secret "127.0.0.1:$port" "$secret" 2>&1)
[[ $out == admitted ]] && ok "control: root with the job's secret is admitted" \
  || bad "control: root with the job's secret: '$out'"

# (c) nobody at worker 0's descriptors and shared memory.
out=$(as_nobody ls "/proc/$worker/fd" 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *"Permission denied"* ]] \
  && ok "(c) nobody listing /proc/$worker/fd: $out" \
  || bad "(c) nobody listing /proc/$worker/fd: exit $rc, '$out'"
denied=0
fds=$(ls "/proc/$worker/fd")
for fd in $fds; do
  if ! timeout 5 setpriv --reuid=nobody --regid="$nobody_gid" --clear-groups \
         head -c 1 "/proc/$worker/fd/$fd" </dev/null >/dev/null 2>"$tmp/fd.err" \
     && grep -q "Permission denied" "$tmp/fd.err"; then
    denied=$((denied + 1))
  fi
done
n=$(wc -w <<<"$fds")
[[ $n -gt 0 && $denied -eq $n ]] \
  && ok "(c) nobody opening /proc/$worker/fd/N: permission denied for all $n" \
  || bad "(c) nobody opening /proc/$worker/fd/N: $denied of $n denied"
range=$(grep -m1 'memfd:actorps-data-' "/proc/$worker/maps" | cut -d' ' -f1)
if [[ -z $range ]]; then
  bad "(c) worker 0 maps no shared-memory segment: $(grep -c memfd "/proc/$worker/maps") memfd mappings"
else
  out=$(as_nobody head -c 8 "/proc/$worker/map_files/$range" 2>&1)
  rc=$?
  [[ $rc -ne 0 && $out == *"Permission denied"* ]] \
    && ok "(c) nobody opening the worker's memfd (/proc/$worker/map_files/$range): $out" \
    || bad "(c) nobody opening the worker's memfd: exit $rc, '$out'"
  [[ $(head -c 8 "/proc/$worker/map_files/$range") == APSSHM01 ]] \
    && ok "control: root reads the segment's magic there" \
    || bad "control: root cannot read the segment at $range"
fi

# The job goes on to its end.
kill -0 "$launcher" 2>/dev/null && ok "the job still ran after the probes" \
  || bad "the job ended before the probes were done (make it longer)"
for ((i = 0; i < 1200; i++)); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  bad "the job did not end within 120 s"
  finish
fi
wait "$launcher"
rc=$?
[[ $rc -eq 0 ]] && ok "launch exited 0" || bad "launch exited $rc"
grep -q '^\[coordinator\] done: .*test_accuracy 0\.[0-9]*' "$tmp/out.log" \
  && ok "$(grep -m1 '^\[coordinator\] done:' "$tmp/out.log" | cut -c1-120)" \
  || bad "no accuracy line"
finish
