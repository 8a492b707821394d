#!/usr/bin/env bash
# Training on a stream end to end, as a user runs it: `actorps stream-gen`
# writes drifting click-log parts, `actorps train` / `launch` with
# --data-stream trains each part once as it appears, with progressive
# evaluation, and ends when the stream does.
#   train     one process: a line per part, every example once (closures =
#             the parts' batches), progressive AUC above chance, the end
#   resume    SIGTERM while the producer is still writing: exit 75 with a
#             checkpoint; --resume goes on at the next part, and the two
#             runs together train every batch once
#   launch    2 ps and 2 workers under launch
#   per_table tables with policies of their own (--table-policy) under
#             launch: each follows its own, the final JSON counts each; a
#             table the model lacks is refused at start
#   bad_input a malformed record skipped (named, counted) or, with
#             data.on_bad_record fail, exit 2
# usage: stream_test.sh ACTORPS SOURCE_DIR CASE
set -u
bin=$1
src=$2
case_name=$3
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
[[ -n ${KEEP:-} ]] && trap - EXIT && echo "kept $tmp"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

rows=20000
batch=512
per_part=$(((rows + batch - 1) / batch)) # closures per part
common=(--config "$src/configs/stream_ctr.json" --batch-size "$batch"
        --data-stream "$tmp/parts" --no-progress)

# closures FILE: N of "closures: N scheduled, M finished" in FILE.
finished() { grep -o 'closures: [0-9]* scheduled, [0-9]* finished' "$1" | grep -o '[0-9]* finished' | cut -d' ' -f1; }

case $case_name in
train)
  "$bin" stream-gen --out "$tmp/parts" --parts 4 --rows-per-part $rows \
    --new-id-rate 0.02 --drift 100 --seed 3 >"$tmp/gen" 2>&1 \
    || { bad "stream-gen: $(tail -3 "$tmp/gen")"; exit 1; }
  "$bin" train "${common[@]}" --stream-idle-timeout-ms 500 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [[ $rc -eq 0 ]] && ok "exit 0" || bad "exit $rc: $(tail -5 "$tmp/err")"
  [[ $(grep -c '^part ' "$tmp/out") -eq 4 ]] && ok "a line per part: $(grep '^part    4' "$tmp/out" | cut -c1-110)" \
    || bad "part lines: $(grep -c '^part ' "$tmp/out")"
  n=$(finished "$tmp/out")
  [[ $n -eq $((4 * per_part)) ]] && ok "every example once: $n closures = 4 parts x $per_part batches" \
    || bad "closures finished: $n, expected $((4 * per_part))"
  auc=$(grep -o 'progressive (test, then train) over all: auc [0-9.]*' "$tmp/out" | grep -o '[0-9.]*$')
  awk -v a="$auc" 'BEGIN { exit !(a > 0.55) }' && ok "progressive AUC over the stream $auc > 0.55" \
    || bad "progressive AUC: '$auc'"
  grep -q 'the stream ended: no new part came within data.stream_idle_timeout_ms (4 parts, 80000 examples read)' "$tmp/err" \
    && ok "ended: $(grep -o 'the stream ended.*' "$tmp/err")" || bad "no end line: $(tail -3 "$tmp/err")"
  # Admission and eviction: fewer rows, the same AUC band, the counts.
  rows_all=$(grep -o '[0-9]* rows held' "$tmp/out" | cut -d' ' -f1)
  "$bin" train "${common[@]}" --stream-end-after 4 --admit-after 2 \
    --steps-to-live 100 >"$tmp/out2" 2>"$tmp/err2"
  rc=$?
  line=$(grep '^table rows:' "$tmp/out2")
  live=$(grep -o '[0-9]* live' <<<"$line" | cut -d' ' -f1)
  before=$(grep -o 'before their admission [0-9]*' <<<"$line" | grep -o '[0-9]*$')
  ttl=$(grep -o 'evicted [0-9]* by time to live' <<<"$line" | grep -o '[0-9]*')
  [[ $rc -eq 0 && -n $live && $live -lt $((rows_all / 2)) && $before -gt 0 && $ttl -gt 0 ]] \
    && ok "admit_after 2, steps_to_live 100: $live rows live of $rows_all without ($line)" \
    || bad "policy run: exit $rc, rows $live of $rows_all: $line $(tail -2 "$tmp/err2")"
  auc2=$(grep -o 'progressive (test, then train) over all: auc [0-9.]*' "$tmp/out2" | grep -o '[0-9.]*$')
  awk -v a="$auc" -v b="$auc2" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }' \
    && ok "progressive AUC with the policy $auc2, without $auc" || bad "AUC with the policy $auc2, without $auc"
  grep -q 'tables without a budget' "$tmp/err2" && ok "the start says what the tables may take" \
    || bad "no table estimate in the log"
  # Progressive windows of 20,000 examples: each holds exactly one part
  # here, so each window's loss and AUC are its part's.
  "$bin" train "${common[@]}" --stream-end-after 4 --progressive-window $rows \
    --metrics-out "$tmp/m.jsonl" >"$tmp/out3" 2>"$tmp/err3"
  rc=$?
  [[ $rc -eq 0 && $(grep -c '^window ' "$tmp/out3") -eq 4 && $(grep -c '"type":"window"' "$tmp/m.jsonl") -eq 4 ]] \
    && ok "4 windows of $rows examples: $(grep '^window    4' "$tmp/out3")" \
    || bad "windows: exit $rc, $(grep -c '^window ' "$tmp/out3") lines: $(tail -2 "$tmp/err3")"
  same=1
  for k in 1 2 3 4; do
    w=$(grep '"type":"window"' "$tmp/m.jsonl" | grep "\"window\":$k[,}]" | grep -o '"progressive_auc":[0-9.e-]*' | cut -d: -f2)
    e=$(grep '"type":"epoch"' "$tmp/m.jsonl" | grep "\"epoch\":$k," | grep -o '"progressive_auc":[0-9.e-]*' | cut -d: -f2)
    [[ -n $w && $w == "$e" ]] || { same=0; echo "window $k: auc '$w', part $k: '$e'"; }
  done
  [[ $same -eq 1 ]] && ok "each window's AUC is its part's, to the last digit" || bad "window and part AUCs differ"
  ;;
resume)
  mkdir -p "$tmp/parts"
  "$bin" stream-gen --out "$tmp/parts" --parts 5 --rows-per-part $rows \
    --seed 4 --interval-ms 1500 >"$tmp/gen" 2>&1 &
  gen=$!
  pids+=("$gen")
  "$bin" train "${common[@]}" --checkpoint-dir "$tmp/ck" >"$tmp/out1" 2>"$tmp/err1" &
  job=$!
  pids+=("$job")
  for _ in $(seq 600); do
    grep -q '^part    2' "$tmp/out1" && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM "$job"
  wait "$job"
  rc=$?
  [[ $rc -eq 75 ]] && ok "SIGTERM mid-stream: exit 75 after $(grep -c '^part ' "$tmp/out1") parts" \
    || bad "SIGTERM: exit $rc: $(tail -5 "$tmp/err1")"
  wait "$gen"
  "$bin" train "${common[@]}" --checkpoint-dir "$tmp/ck" --resume \
    --stream-end-after 5 >"$tmp/out2" 2>"$tmp/err2"
  rc=$?
  [[ $rc -eq 0 ]] && ok "resumed: exit 0" || bad "resume: exit $rc: $(tail -5 "$tmp/err2")"
  a=$(grep -o 'stopped on request (SIGTERM or SIGUSR1) at step [0-9]*' "$tmp/err1" | grep -o '[0-9]*$')
  b=$(finished "$tmp/out2")
  retrained=$(grep -o '[0-9]* examples finished after a cancelled closure' "$tmp/err1" | cut -d' ' -f1)
  [[ -z $retrained ]] && ok "no closure finished after a cancelled one" \
    || echo "note: $retrained examples will be trained again"
  [[ -n $a && -n $b && $((a + b)) -eq $((5 * per_part)) ]] \
    && ok "every batch of the 5 parts once: $a closures before the stop, $b after ($((5 * per_part)) batches)" \
    || bad "closures: first run $a, resumed $b, expected $((5 * per_part)) in all"
  first_resumed=$(grep -m1 '^part ' "$tmp/out2" | awk '{print $2}')
  last_first=$(grep '^part ' "$tmp/out1" | tail -1 | awk '{print $2}')
  [[ -n $first_resumed && $first_resumed -eq $((last_first + 1)) ]] \
    && ok "the resumed run goes on with part $first_resumed" \
    || bad "resumed at part '$first_resumed' after '$last_first'"
  ;;
launch)
  "$bin" stream-gen --out "$tmp/parts" --parts 3 --rows-per-part $rows \
    --new-id-rate 0.02 --drift 100 --seed 5 >"$tmp/gen" 2>&1 \
    || { bad "stream-gen: $(tail -3 "$tmp/gen")"; exit 1; }
  "$bin" launch "${common[@]}" --workers 2 --ps 2 --stream-end-after 3 >"$tmp/out" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] && ok "launch: exit 0" || bad "launch: exit $rc: $(grep -v '^\[launch\]' "$tmp/out" | tail -5)"
  n=$(finished "$tmp/out")
  [[ $n -eq $((3 * per_part)) ]] && ok "launch: every example once: $n closures" \
    || bad "launch: closures finished $n, expected $((3 * per_part))"
  grep -q 'its last part (data.stream_end_after) was read' "$tmp/out" \
    && ok "launch: ended after 3 parts" || bad "launch: no end line"
  ;;
per_table)
  "$bin" stream-gen --out "$tmp/parts" --parts 2 --rows-per-part 5000 \
    --new-id-rate 0.02 --drift 100 --seed 7 >"$tmp/gen" 2>&1 \
    || { bad "stream-gen: $(tail -3 "$tmp/gen")"; exit 1; }
  # Every table admits at the second pull, except C13 (at once); C1 (10^7
  # ids) holds at most 50 rows a shard (2 shards). The flags reach the ps
  # nodes as launch passes them on.
  "$bin" launch "${common[@]}" --workers 1 --ps 2 --stream-end-after 2 \
    --admit-after 2 --table-policy embedding/C13.admit_after=0 \
    --table-policy embedding/C1.max_rows=50 --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] && ok "launch with per-table policies: exit 0" \
    || bad "launch: exit $rc: $(grep -v '^\[launch\]' "$tmp/out" | tail -5)"
  final=$(grep '"type":"final"' "$tmp/m.jsonl" 2>/dev/null)
  count() { jq -r --arg t "embedding/$1" ".tables[\$t].$2 // \"none\"" <<<"$final"; }
  c1=$(count C1 table_rows) c1_out=$(count C1 evicted_budget)
  [[ $c1 =~ ^[0-9]+$ && $c1 -le 100 && $c1_out -gt 0 ]] \
    && ok "C1 within its 2 x 50 rows: $c1 rows, $c1_out evicted for the budget" \
    || bad "C1: $c1 rows, $c1_out evicted for the budget"
  c2=$(count C2 table_rows) c2_wait=$(count C2 keys_rejected) c2_out=$(count C2 evicted_budget)
  [[ $c2 =~ ^[0-9]+$ && $c2 -gt 100 && $c2_wait -gt 0 && $c2_out -eq 0 ]] \
    && ok "C2 by the default: $c2 rows, $c2_wait keys pulled before their admission, none evicted" \
    || bad "C2: $c2 rows, $c2_wait rejected, $c2_out evicted"
  c13=$(count C13 table_rows) c13_wait=$(count C13 keys_rejected)
  [[ $c13 =~ ^[0-9]+$ && $c13 -gt 0 && $c13_wait -eq 0 ]] \
    && ok "C13 admits at once: $c13 rows, none pulled before its admission" \
    || bad "C13: $c13 rows, $c13_wait rejected"
  "$bin" train "${common[@]}" --stream-end-after 2 \
    --table-policy embedding/user.admit_after=2 >"$tmp/out2" 2>"$tmp/err2"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'has no table "embedding/user" (its tables: embedding/C1, ' "$tmp/err2" \
    && ok "a table the model lacks: exit 2, $(tail -1 "$tmp/err2" | cut -c1-140)" \
    || bad "unknown table: exit $rc: $(tail -2 "$tmp/err2")"
  ;;
bad_input)
  "$bin" stream-gen --out "$tmp/parts" --parts 2 --rows-per-part 2000 --seed 6 >"$tmp/gen" 2>&1
  # A malformed record in part 1 (a label that is not 0 or 1).
  sed -i '5s/^[01],/7,/' "$tmp/parts/part-00000001.csv"
  "$bin" train "${common[@]}" --stream-end-after 2 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [[ $rc -eq 0 ]] && grep -q 'part-00000001.csv:5' "$tmp/err" \
    && ok "a malformed record skipped and named: $(grep -m1 -o 'part-00000001.csv:5.*' "$tmp/err" | cut -c1-100)" \
    || bad "skip: exit $rc: $(tail -3 "$tmp/err")"
  sed 's/"on_bad_record": "skip"/"on_bad_record": "fail"/' \
    "$src/configs/stream_ctr.json" >"$tmp/fail.json"
  "$bin" train "${common[@]}" --config "$tmp/fail.json" --stream-end-after 2 \
    >"$tmp/out2" 2>"$tmp/err2"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q 'part-00000001.csv:5' "$tmp/err2" \
    && ok "on_bad_record fail: exit 2, $(grep -m1 -o 'part-00000001.csv:5.*' "$tmp/err2" | cut -c1-100)" \
    || bad "fail: exit $rc: $(tail -3 "$tmp/err2")"
  "$bin" train "${common[@]}" --data-stream "$tmp/none" >"$tmp/out3" 2>"$tmp/err3"
  rc=$?
  [[ $rc -eq 2 ]] && ok "a missing folder: exit 2, $(tail -1 "$tmp/err3" | cut -c1-120)" \
    || bad "missing folder: exit $rc: $(tail -2 "$tmp/err3")"
  ;;
*)
  bad "unknown case $case_name"
  ;;
esac
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
