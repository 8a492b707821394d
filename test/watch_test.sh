#!/usr/bin/env bash
# Watching a job, end to end with the actorps binary:
#   metrics         --metrics-port on `actorps train`: the endpoint is scraped
#                   (curl) until its values move; a killed worker shows in
#                   the failure and restart counters; a port in use is refused
#   metrics_tls     --metrics-tls on / mutual with the cluster's certificates
#                   and --metrics-token: HTTPS only, the token or a client
#                   certificate of the CA required, bad settings exit 2
#   metrics_launch  --metrics-port under `actorps launch`: every node serves
#                   its own metrics (worker latencies, ps staleness)
#   plot            --plot: PNGs of a dense and a table model; no gnuplot and
#                   an unwritable path are clear errors before training
#   evaluator       `actorps node --role evaluator` beside a running job: it
#                   skips a corrupt checkpoint, evaluates at least two of the
#                   job's, and its last result is the job's own final metrics
# No assertion is timed: every wait polls until a condition holds or the
# process it waits for has ended.
#
#   test/watch_test.sh BUILD/actorps SOURCE_DIR CASE
set -uo pipefail
bin=${1:?usage: watch_test.sh ACTORPS SOURCE_DIR CASE}
src=${2:?usage: watch_test.sh ACTORPS SOURCE_DIR CASE}
case=${3:?usage: watch_test.sh ACTORPS SOURCE_DIR CASE}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; failed=1; }

fashion=(--config "$src/configs/fashion_mnist.json" --train-limit 6400
         --test-limit 500 --no-progress)

# wait_for PID FILE PATTERN: prints the first line of FILE matching PATTERN
# once there is one; fails when PID has ended without it.
wait_for() {
  local line
  while :; do
    line=$(grep -m1 -E "$3" "$2" 2>/dev/null) && { echo "$line"; return 0; }
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.1
  done
}

# port_of LINE: the port of "... metrics on http://HOST:PORT/metrics".
port_of() {
  sed -E 's|.*metrics on https?://[^:]*:([0-9]+)/metrics.*|\1|' <<<"$1"
}

# value TEXT SAMPLE: the value of one sample ("name{labels}") in a scrape.
value() {
  awk -v s="$2" '$1 == s { print $2; found = 1 } END { if (!found) print "absent" }' <<<"$1"
}

# greater A B: whether number A > number B.
greater() {
  [[ $1 != absent && $2 != absent ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'
}

# scrape_until PID PORT SAMPLE MIN: scrapes until SAMPLE > MIN, prints the
# scrape; fails when PID ended first.
scrape_until() {
  local text
  while kill -0 "$1" 2>/dev/null; do
    text=$(curl -sf "http://127.0.0.1:$2/metrics") \
      && greater "$(value "$text" "$3")" "$4" && { echo "$text"; return 0; }
    sleep 0.1
  done
  return 1
}

case $case in
metrics)
  # A long job (killed when the checks are done), a worker killed at step 40.
  "$bin" train "${fashion[@]}" --epochs 1000 --metrics-port 0 \
    --fault kill:worker:1@40 >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  pids+=("$pid")
  line=$(wait_for "$pid" "$tmp/err" 'metrics on http://') \
    || { bad "no metrics endpoint: $(tail -5 "$tmp/err")"; exit 1; }
  port=$(port_of "$line")
  s1=$(scrape_until "$pid" "$port" actorps_steps_total 0) \
    || { bad "the job ended before a step was counted: $(tail -5 "$tmp/err")"; exit 1; }
  steps1=$(value "$s1" actorps_steps_total)
  pulls1=$(value "$s1" 'actorps_pull_latency_seconds_count{ps="0"}')
  s2=$(scrape_until "$pid" "$port" actorps_steps_total "$steps1") \
    || { bad "the steps counter did not move: $(tail -5 "$tmp/err")"; exit 1; }
  greater "$(value "$s2" 'actorps_pull_latency_seconds_count{ps="0"}')" "$pulls1" \
    && greater "$(value "$s2" actorps_samples_total)" "$(value "$s1" actorps_samples_total)" \
    && greater "$(value "$s2" 'actorps_closures_total{state="finished"}')" \
               "$(value "$s1" 'actorps_closures_total{state="finished"}')" \
    && ok "scraped twice, values moved: steps $steps1 -> $(value "$s2" actorps_steps_total)" \
    || bad "values did not move: pulls $pulls1 -> $(value "$s2" 'actorps_pull_latency_seconds_count{ps="0"}')"
  # Every family the issue asks for, in Prometheus' text format.
  for sample in actorps_samples_per_second 'actorps_closures_total{state="scheduled"}' \
      'actorps_closures_total{state="reexecuted"}' \
      'actorps_dispatcher_closures{state="queued"}' \
      'actorps_dispatcher_closures{state="running"}' \
      'actorps_pull_latency_seconds_bucket{ps="1",le="0.001"}' \
      'actorps_push_latency_seconds_count{ps="0"}' \
      'actorps_staleness_bucket{le="0"}' actorps_staleness_count \
      'actorps_mailbox_depth{index="0",role="ps"}' \
      'actorps_mailbox_depth{index="1",role="worker"}' \
      'actorps_mailbox_depth{index="0",role="dispatcher"}' \
      'actorps_failures_total{role="ps"}' 'actorps_restarts_total{role="worker"}'; do
    [[ $(value "$s2" "$sample") != absent ]] || bad "missing from the scrape: $sample"
  done
  grep -q '^# TYPE actorps_push_latency_seconds histogram' <<<"$s2" \
    || bad "no TYPE line for the push latency histogram"
  greater "$(value "$s2" actorps_staleness_count)" 0 \
    && ok "staleness histogram: $(value "$s2" actorps_staleness_count) pushes" \
    || bad "no staleness counted"
  # The worker killed at step 40 is a failure, and its restart a restart.
  s3=$(scrape_until "$pid" "$port" 'actorps_restarts_total{role="worker"}' 0) \
    && greater "$(value "$s3" 'actorps_failures_total{role="worker"}')" 0 \
    && ok "killed worker counted: failures $(value "$s3" 'actorps_failures_total{role="worker"}'), restarts $(value "$s3" 'actorps_restarts_total{role="worker"}')" \
    || bad "failure and restart of worker 1 not counted: $(grep -E 'lost|restart' "$tmp/err" | head -3)"
  # It binds the loopback address by default, not every interface.
  [[ $line == *"metrics on http://127.0.0.1:$port/metrics"* ]] \
    && ss -ltnH "sport = :$port" | grep -q "127.0.0.1:$port" \
    && ! ss -ltnH "sport = :$port" | grep -q "0.0.0.0:$port\|\*:$port" \
    && ok "bound to 127.0.0.1 only: $(ss -ltnH "sport = :$port" | awk '{print $4}')" \
    || bad "bound to: $(ss -ltnH "sport = :$port") / $line"
  # Idle connections (ten held open, more than the endpoint's threads) do
  # not hold up a scrape: each is closed 2 s after it sent nothing.
  for fd in 10 11 12 13 14 15 16 17 18 19; do
    eval "exec $fd<>/dev/tcp/127.0.0.1/$port"
  done
  curl -sf -m 10 "http://127.0.0.1:$port/metrics" | grep -q '^actorps_steps_total' \
    && ok "a scrape beside 10 idle connections answers" \
    || bad "a scrape beside 10 idle connections timed out"
  for fd in 10 11 12 13 14 15 16 17 18 19; do
    eval "exec $fd>&-"
  done
  # Another job on the same port is refused before it starts.
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port "$port" >"$tmp/out2" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "cannot listen on 127.0.0.1:$port" "$tmp/out2" \
    && ok "a port in use is refused: $(grep -o 'cannot listen.*' "$tmp/out2" | cut -c1-80)" \
    || bad "port in use: exit $rc: $(tail -2 "$tmp/out2")"
  ;;
metrics_address)
  # --metrics-address: the endpoint binds that address and no other.
  "$bin" train "${fashion[@]}" --epochs 1000 --metrics-port 0 \
    --metrics-address 127.0.0.2 >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  pids+=("$pid")
  line=$(wait_for "$pid" "$tmp/err" 'metrics on http://') \
    || { bad "no metrics endpoint: $(tail -5 "$tmp/err")"; exit 1; }
  port=$(port_of "$line")
  [[ $line == *"http://127.0.0.2:$port/"* ]] && ok "logged: ${line##*] }" \
    || bad "the log line: $line"
  curl -sf -m 5 "http://127.0.0.2:$port/metrics" | grep -q '^# TYPE actorps_' \
    && ok "scraped on 127.0.0.2" || bad "no scrape on 127.0.0.2:$port"
  curl -s -m 5 -o /dev/null "http://127.0.0.1:$port/metrics" \
    && bad "127.0.0.1:$port answers too" || ok "127.0.0.1:$port does not answer"
  # --metrics-auth: a scrape without the file's USER:PASSWORD is refused
  # (401), one with them answers; a malformed file is exit 2.
  printf 'scraper:s3cret-%s\n' "$RANDOM" >"$tmp/auth"
  "$bin" train "${fashion[@]}" --epochs 1000 --metrics-port 0 \
    --metrics-auth "$tmp/auth" >"$tmp/out4" 2>"$tmp/err4" &
  pid=$!
  pids+=("$pid")
  line=$(wait_for "$pid" "$tmp/err4" 'metrics on http://') \
    || { bad "no metrics endpoint with --metrics-auth: $(tail -5 "$tmp/err4")"; exit 1; }
  port=$(port_of "$line")
  code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")
  wrong=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -u scraper:guess "http://127.0.0.1:$port/metrics")
  [[ $code == 401 && $wrong == 401 ]] && ok "without the credentials, or wrong ones: HTTP $code, $wrong" \
    || bad "without credentials: HTTP $code, wrong ones: $wrong"
  curl -sf -m 5 -u "$(cat "$tmp/auth")" "http://127.0.0.1:$port/metrics" | grep -q '^# TYPE actorps_' \
    && ok "with the file's credentials: scraped" || bad "no scrape with the credentials"
  [[ $line == *"(basic authentication)"* ]] && ok "logged: ${line##*] }" || bad "the log line: $line"
  kill "$pid" 2>/dev/null
  echo "no colon" >"$tmp/bad_auth"
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port 0 \
    --metrics-auth "$tmp/bad_auth" >"$tmp/out5" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'its first line must be USER:PASSWORD' "$tmp/out5" \
    && ok "a malformed credentials file: exit 2" || bad "malformed auth file: exit $rc: $(tail -2 "$tmp/out5")"
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port 0 \
    --metrics-address no-such-host.invalid >"$tmp/out3" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'metrics-address: cannot resolve no-such-host.invalid' "$tmp/out3" \
    && ok "an address that does not resolve: exit 2, $(grep -o 'cannot resolve.*' "$tmp/out3" | cut -c1-80)" \
    || bad "a bad address: exit $rc: $(tail -2 "$tmp/out3")"
  ;;
metrics_tls)
  "$bin" certs --ps 1 --workers 1 --out "$tmp/certs" >/dev/null 2>&1 \
    || { bad "actorps certs failed"; exit 1; }
  printf 'tok-%s-%s\n' "$RANDOM" "$RANDOM" >"$tmp/token"
  # HTTPS with the coordinator's certificate and a bearer token.
  "$bin" train "${fashion[@]}" --epochs 1000 --metrics-port 0 --tls "$tmp/certs" \
    --metrics-tls on --metrics-token "$tmp/token" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  pids+=("$pid")
  line=$(wait_for "$pid" "$tmp/err" 'metrics on https://') \
    || { bad "no HTTPS metrics endpoint: $(tail -5 "$tmp/err")"; exit 1; }
  port=$(port_of "$line")
  [[ $line == *"(bearer token, TLS)"* ]] && ok "logged: ${line##*] }" || bad "the log line: $line"
  # The certificate names the node (DNS:coordinator), as a scraper checks it.
  url="https://coordinator:$port/metrics"
  via=(--connect-to "coordinator:$port:127.0.0.1:$port" --cacert "$tmp/certs/ca.pem")
  code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "${via[@]}" "$url")
  wrong=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "${via[@]}" -H 'Authorization: Bearer guess' "$url")
  [[ $code == 401 && $wrong == 401 ]] && ok "without the token, or a wrong one: HTTP $code, $wrong" \
    || bad "without the token: HTTP $code, a wrong one: $wrong"
  curl -sf -m 5 "${via[@]}" -H "Authorization: Bearer $(cat "$tmp/token")" "$url" \
    | grep -q '^# TYPE actorps_' && ok "with the token over HTTPS: scraped" \
    || bad "no scrape with the token over HTTPS"
  plain=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$tmp/token")" \
    "http://127.0.0.1:$port/metrics")
  [[ $plain != 200 ]] && ok "plain HTTP gets no metrics (HTTP code $plain)" || bad "plain HTTP answered 200"
  curl -s -m 5 -o /dev/null --connect-to "coordinator:$port:127.0.0.1:$port" "$url"
  rc=$?
  [[ $rc -eq 60 ]] && ok "a client that does not trust the cluster's CA refuses the certificate (curl exit 60)" \
    || bad "without the CA: curl exit $rc"
  kill "$pid" 2>/dev/null
  # Mutual: a scraper must show a certificate of the cluster's CA.
  "$bin" train "${fashion[@]}" --epochs 1000 --metrics-port 0 --tls "$tmp/certs" \
    --metrics-tls mutual >"$tmp/out2" 2>"$tmp/err2" &
  pid=$!
  pids+=("$pid")
  line=$(wait_for "$pid" "$tmp/err2" 'metrics on https://') \
    || { bad "no mutual-TLS metrics endpoint: $(tail -5 "$tmp/err2")"; exit 1; }
  port=$(port_of "$line")
  url="https://coordinator:$port/metrics"
  via=(--connect-to "coordinator:$port:127.0.0.1:$port" --cacert "$tmp/certs/ca.pem")
  curl -s -m 5 -o /dev/null "${via[@]}" "$url"
  rc=$?
  [[ $rc -ne 0 ]] && ok "mutual: no client certificate, no answer (curl exit $rc)" \
    || bad "mutual: answered a client without a certificate"
  curl -sf -m 5 "${via[@]}" --cert "$tmp/certs/worker0.pem" --key "$tmp/certs/worker0.key" "$url" \
    | grep -q '^# TYPE actorps_' && ok "mutual: with a certificate of the CA, scraped" \
    || bad "mutual: no scrape with a client certificate"
  kill "$pid" 2>/dev/null
  # Bad settings are refused before the job starts.
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port 0 --metrics-tls on >"$tmp/out3" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'metrics-tls: the job has no certificates' "$tmp/out3" \
    && ok "--metrics-tls without certificates: exit 2" || bad "no certificates: exit $rc: $(tail -2 "$tmp/out3")"
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port 0 --metrics-tls maybe >"$tmp/out4" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q '"maybe" is not a mode' "$tmp/out4" \
    && ok "an unknown --metrics-tls mode: exit 2" || bad "unknown mode: exit $rc: $(tail -2 "$tmp/out4")"
  printf '\n' >"$tmp/empty_token"
  "$bin" train "${fashion[@]}" --epochs 1 --metrics-port 0 --metrics-token "$tmp/empty_token" >"$tmp/out5" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'its first line must be the token' "$tmp/out5" \
    && ok "an empty token file: exit 2" || bad "empty token: exit $rc: $(tail -2 "$tmp/out5")"
  ;;
metrics_launch)
  "$bin" launch "${fashion[@]}" --epochs 1000 --workers 2 --ps 2 \
    --metrics-port 0 >"$tmp/out" 2>&1 &
  pid=$!
  pids+=("$pid")
  ports=()
  for node in coordinator ps0 worker0; do
    line=$(wait_for "$pid" "$tmp/out" "^\\[$node\\].*metrics on http://") \
      || { bad "no metrics endpoint of $node: $(tail -5 "$tmp/out")"; exit 1; }
    ports+=("$(port_of "$line")")
  done
  s1=$(scrape_until "$pid" "${ports[2]}" 'actorps_pull_latency_seconds_count{ps="1"}' 0) \
    && s2=$(scrape_until "$pid" "${ports[2]}" 'actorps_pull_latency_seconds_count{ps="1"}' \
                         "$(value "$s1" 'actorps_pull_latency_seconds_count{ps="1"}')") \
    && ok "worker0's own endpoint: pull latencies to ps1 measured and moving" \
    || bad "worker0's endpoint: $(tail -5 "$tmp/out")"
  s=$(scrape_until "$pid" "${ports[1]}" actorps_staleness_count 0) \
    && [[ $(value "$s" 'actorps_mailbox_depth{index="0",role="ps"}') != absent ]] \
    && ok "ps0's own endpoint: staleness of $(value "$s" actorps_staleness_count) pushes, its mailbox" \
    || bad "ps0's endpoint: $(tail -5 "$tmp/out")"
  s=$(scrape_until "$pid" "${ports[0]}" actorps_steps_total 0) \
    && ok "the coordinator's endpoint: $(value "$s" actorps_steps_total) steps" \
    || bad "the coordinator's endpoint: $(tail -5 "$tmp/out")"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ;;
plot)
  magic() { od -An -tx1 -N8 "$1" | tr -d ' \n'; }
  for job in fashion a9a; do
    if [[ $job == fashion ]]; then
      args=("${fashion[@]}" --epochs 3)
    else
      args=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a" --epochs 3 --no-progress)
    fi
    "$bin" train "${args[@]}" --plot "$tmp/$job.png" >"$tmp/out" 2>&1
    rc=$?
    if [[ $rc -eq 0 && $(magic "$tmp/$job.png") == 89504e470d0a1a0a ]] \
       && [[ $(stat -c %s "$tmp/$job.png") -gt 5000 ]]; then
      ok "$job: a PNG of $(stat -c %s "$tmp/$job.png") bytes"
    else
      bad "$job plot: exit $rc: $(tail -3 "$tmp/out")"
    fi
  done
  [[ ! -e $tmp/fashion.png.tmp ]] || bad "a temporary plot file was left"
  # No gnuplot on PATH: an error before training.
  mkdir "$tmp/nobin"
  PATH="$tmp/nobin" "$bin" train "${fashion[@]}" --epochs 1 --plot "$tmp/x.png" >"$tmp/out" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'gnuplot not found on PATH' "$tmp/out" \
    && ! grep -q '^epoch' "$tmp/out" \
    && ok "no gnuplot: $(grep -o 'gnuplot not found.*' "$tmp/out")" \
    || bad "no gnuplot: exit $rc: $(tail -3 "$tmp/out")"
  "$bin" train "${fashion[@]}" --epochs 1 --plot "$tmp/no/such/dir/x.png" >"$tmp/out" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'cannot write' "$tmp/out" \
    && ok "unwritable plot path refused: $(grep -o 'cannot write.*' "$tmp/out")" \
    || bad "unwritable plot path: exit $rc: $(tail -3 "$tmp/out")"
  ;;
evaluator)
  ck=$tmp/ck
  # A checkpoint that cannot be read, there before the job starts.
  mkdir -p "$ck/ckpt-0000000001"
  echo '{"format": "actorps-checkpoint", "version": 2, "trunc' >"$ck/ckpt-0000000001/manifest.json"
  spec='{"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"],
         "ps": ["127.0.0.1:4", "127.0.0.1:5"]}, "task": {"type": "evaluator", "index": 0}}'
  TF_CONFIG=$spec "$bin" node "${fashion[@]}" --epochs 3 --checkpoint-dir "$ck" \
    --metrics-out "$tmp/eval.jsonl" >"$tmp/eval.out" 2>"$tmp/eval.err" &
  epid=$!
  pids+=("$epid")
  wait_for "$epid" "$tmp/eval.jsonl" '"type":"skipped"' >/dev/null \
    && ok "corrupt checkpoint skipped: $(grep -o 'skipping.*' "$tmp/eval.err" | cut -c1-120)" \
    || bad "the corrupt checkpoint was not skipped: $(tail -3 "$tmp/eval.err")"
  # The job: checkpoints every 25 steps and at epoch ends (100 per epoch).
  "$bin" train "${fashion[@]}" --epochs 3 --checkpoint-dir "$ck" --checkpoint-every 25 \
    --metrics-out "$tmp/train.jsonl" >"$tmp/train.out" 2>"$tmp/train.err"
  rc=$?
  [[ $rc -eq 0 ]] || bad "the job failed: exit $rc: $(tail -3 "$tmp/train.err")"
  wait "$epid"
  erc=$?
  evals=$(jq -s '[.[] | select(.type == "evaluation")] | length' "$tmp/eval.jsonl")
  increasing=$(jq -s '[.[] | select(.type == "evaluation") | .global_step]
                      | . == (sort | unique)' "$tmp/eval.jsonl")
  last_epoch=$(jq -s '[.[] | select(.type == "evaluation")] | last | .epoch' "$tmp/eval.jsonl")
  eval_acc=$(jq -s '[.[] | select(.type == "evaluation")] | last | .test_accuracy' "$tmp/eval.jsonl")
  train_acc=$(jq -s '[.[] | select(.type == "final")] | last | .test_accuracy' "$tmp/train.jsonl")
  if [[ $erc -eq 0 && $evals -ge 2 && $increasing == true && $last_epoch == 3 ]] \
     && awk -v a="$eval_acc" -v b="$train_acc" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }'; then
    ok "evaluator: $evals checkpoints of the running job evaluated; the last (epoch 3) gives the job's test_accuracy $train_acc"
  else
    bad "evaluator: exit $erc, $evals evaluations, steps increasing $increasing, last epoch $last_epoch, accuracy $eval_acc vs the job's $train_acc: $(tail -3 "$tmp/eval.err")"
  fi
  # An evaluator of another number of ps re-cuts the checkpoints it reads
  # (offline re-sharding) and gives the same numbers: the job's last
  # checkpoint, evaluated as if by a job of 3 ps.
  spec3='{"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"],
         "ps": ["127.0.0.1:4", "127.0.0.1:5", "127.0.0.1:6"]}, "task": {"type": "evaluator", "index": 0}}'
  TF_CONFIG=$spec3 timeout 120 "$bin" node "${fashion[@]}" --epochs 3 --checkpoint-dir "$ck" \
    --metrics-out "$tmp/eval3.jsonl" >"$tmp/eval3.out" 2>"$tmp/eval3.err"
  rc=$?
  acc3=$(jq -s '[.[] | select(.type == "evaluation")] | last | .test_accuracy' "$tmp/eval3.jsonl" 2>/dev/null)
  if [[ $rc -eq 0 ]] && grep -q 'a checkpoint of 2 ps onto 3: re-sharded' "$tmp/eval3.err" \
     && awk -v a="$acc3" -v b="$train_acc" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }'; then
    ok "evaluator on 3 ps: $(grep -o 'a checkpoint of 2 ps onto 3: re-sharded.*' "$tmp/eval3.err" | head -1); test_accuracy $acc3, the job's"
  else
    bad "evaluator on 3 ps: exit $rc, accuracy '$acc3' vs the job's $train_acc: $(tail -3 "$tmp/eval3.err")"
  fi
  # A job without a checkpoint folder has nothing to watch.
  TF_CONFIG=$spec "$bin" node "${fashion[@]}" >"$tmp/out" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'no checkpoint_dir' "$tmp/out" \
    && ok "no checkpoint folder: $(grep -o 'evaluator: the job.*' "$tmp/out")" \
    || bad "evaluator without checkpoint_dir: exit $rc: $(tail -2 "$tmp/out")"
  ;;
*)
  echo "unknown case $case"
  exit 2
  ;;
esac
exit $failed
