#!/usr/bin/env bash
# A checkpoint restored onto another number of parameter servers (offline
# re-sharding) as a user runs it: a9a (a dense bias with Adam's two slots, a
# table with FTRL's two slots and per-row steps) trained with --ps 2 and
# continued from its checkpoints with --ps 3 (a full checkpoint and a chain
# of deltas, in one process and with launch), and trained with --ps 3 and
# resumed with --ps 1 and restored with --ps 2. One worker
# makes training deterministic, so a restore that brings back every value,
# slot and step exactly goes on as the original did: each epoch's test loss
# after the restore equals the original's (bit for bit today; 1e-9 asked).
# usage: reshard_cli_test.sh ACTORPS_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

# 50 steps per epoch; a checkpoint at each epoch end: ckpt-50 full, ckpt-100
# and ckpt-150 deltas of it.
job=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a"
     --train-limit 3200 --test-limit 2000 --workers 1 --optimizer adam
     --no-progress --epochs 3)

# test_loss of epoch N in metrics file F ("" if none).
loss_of() {
  grep '"type":"epoch"' "$1" | grep "\"epoch\":$2," \
    | sed -n 's/.*"test_loss":\([-0-9.e]*\).*/\1/p'
}
# start_step of the final object of metrics file F.
start_of() {
  grep '"type":"final"' "$1" | sed -n 's/.*"start_step":\([0-9]*\).*/\1/p'
}
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-9) }'; }

for ps in 2 3; do
  if ! "$bin" train "${job[@]}" --ps $ps --checkpoint-dir "$tmp/ck$ps" \
       --metrics-out "$tmp/orig$ps.jsonl" >/dev/null 2>"$tmp/err"; then
    bad "training with --ps $ps: $(tail -3 "$tmp/err")"
  fi
done

# check NAME FROM_PS TO_PS FIRST_EPOCH START_STEP ARGS...: a restore from a
# checkpoint of FROM_PS onto TO_PS logs its re-sharding, starts at
# START_STEP, and each of its epochs (FIRST_EPOCH to 3) has the original's
# test loss.
check() {
  local name=$1 from=$2 to=$3 first=$4 start=$5
  shift 5
  "$bin" train "${job[@]}" --ps "$to" --metrics-out "$tmp/r.jsonl" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local line="restoring a checkpoint of $from ps onto $to: re-sharded"
  if [[ $rc -ne 0 ]] || ! grep -q "$line" "$tmp/err"; then
    bad "$name: exit $rc: $(tail -3 "$tmp/err")"
    return
  fi
  local e losses="" fine=1
  for ((e = 1; e <= 3; e++)); do
    local a b
    a=$(loss_of "$tmp/orig$from.jsonl" $e)
    b=$(loss_of "$tmp/r.jsonl" $e)
    if ((e < first)); then
      [[ -z $b ]] || fine=0
    else
      same "$a" "$b" || fine=0
      losses+=" epoch $e $b (original $a)"
    fi
  done
  if [[ $fine -eq 1 && $(start_of "$tmp/r.jsonl") == "$start" ]]; then
    ok "$name: $(grep -o "$line.*" "$tmp/err"); from step $start;$losses"
  else
    bad "$name: start step $(start_of "$tmp/r.jsonl") (expected $start);$losses: $(cat "$tmp/r.jsonl" | head -3)"
  fi
}

check "2 ps onto 3, a full checkpoint" 2 3 2 50 \
  --restore "$tmp/ck2/ckpt-0000000050"
check "2 ps onto 3, a chain of a full checkpoint and a delta" 2 3 3 100 \
  --restore "$tmp/ck2/ckpt-0000000100"
# --resume takes the newest in the directory: without ckpt-150, ckpt-100.
rm -rf "$tmp/ck3/ckpt-0000000150"
check "3 ps onto 1, --resume" 3 1 3 100 --resume --checkpoint-dir "$tmp/ck3"
check "3 ps onto 2, a full checkpoint" 3 2 2 50 \
  --restore "$tmp/ck3/ckpt-0000000050"

# The job's own next checkpoints are of its placement: a second --resume
# onto 1 ps re-shards nothing.
if "$bin" train "${job[@]}" --ps 1 --epochs 4 --resume \
     --checkpoint-dir "$tmp/ck3" >/dev/null 2>"$tmp/err" \
   && ! grep -q "re-sharded" "$tmp/err" \
   && grep -q '"cluster": *"1 workers, 1 ps"' "$tmp/ck3/ckpt-0000000200/manifest.json"; then
  ok "the re-sharded job's own checkpoints are of 1 ps and resume as they are"
else
  bad "resuming the re-sharded job: $(tail -3 "$tmp/err")"
fi

# A job of processes re-shards in its coordinator the same way (launch
# prints the coordinator's lines, log included, on its stdout).
if "$bin" launch "${job[@]}" --ps 3 --restore "$tmp/ck2/ckpt-0000000050" \
     >"$tmp/err" 2>&1 \
   && grep -q "restoring a checkpoint of 2 ps onto 3: re-sharded" "$tmp/err" \
   && grep -q "resumed from .*: 1 epochs and 0 steps" "$tmp/err" \
   && grep -q "epoch   3/3" "$tmp/err"; then
  ok "launch --ps 3 from a checkpoint of 2 ps"
else
  bad "launch --ps 3 from a checkpoint of 2 ps: $(tail -3 "$tmp/err")"
fi

# A variables-only restore re-shards too.
if "$bin" train "${job[@]}" --ps 3 --epochs 1 --restore-variables-only \
     --restore "$tmp/ck2/ckpt-0000000100" --checkpoint-dir "$tmp/new" \
     >/dev/null 2>"$tmp/err" \
   && grep -q "restoring a checkpoint of 2 ps onto 3: re-sharded" "$tmp/err" \
   && grep -q "new run from the variables of" "$tmp/err"; then
  ok "--restore-variables-only onto 3 ps: $(grep -o 'new run from.*' "$tmp/err")"
else
  bad "--restore-variables-only onto 3 ps: $(tail -3 "$tmp/err")"
fi

# Anything else that differs is refused as before: exit 2, named.
"$bin" train "${job[@]}" --ps 3 --optimizer sgd \
  --restore "$tmp/ck2/ckpt-0000000050" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 2 ]] && grep -q "and another optimizer (adam" "$tmp/err" \
   && ! grep -q "re-sharded\|restore it with --ps" "$tmp/err"; then
  ok "another optimizer and another number of ps refused: $(cat "$tmp/err")"
else
  bad "another optimizer onto 3 ps: exit $rc: $(cat "$tmp/err")"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
