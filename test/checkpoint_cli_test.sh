#!/usr/bin/env bash
# Checkpoints as a user runs them: `actorps train --checkpoint-dir`, then
# `--resume` / `--restore` (with the counts of the run and of the job), a new
# run from a checkpoint's variables (`--restore-variables-only`), and
# corrupt, truncated or foreign checkpoints (another model, optimizer, data,
# number of ps) refused at start with the file named, exit status 2, and
# nothing else touched.
# usage: checkpoint_cli_test.sh ACTORPS_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

cfg=$src/configs/fashion_mnist.json
job=(--config "$cfg" --train-limit 6400 --test-limit 1000 --no-progress)
ck=$tmp/ck

# 2 epochs of 100 steps (50 per worker), a checkpoint every 20 steps and at
# each epoch end; the newest 3 are kept.
if "$bin" train "${job[@]}" --epochs 2 --checkpoint-dir "$ck" \
     --checkpoint-every 20 >"$tmp/out1" 2>"$tmp/err1"; then
  ok "training with checkpoints"
else
  bad "training with checkpoints: $(cat "$tmp/err1")"
fi
n=$(ls "$ck" | grep -c '^ckpt-')
if [[ $n -eq 3 ]] && [[ -z $(ls -A "$ck" | grep -v '^ckpt-') ]]; then
  ok "the newest 3 checkpoints are kept, nothing else: $(ls "$ck" | tr '\n' ' ')"
else
  bad "checkpoint dir: $(ls -A "$ck" | tr '\n' ' ')"
fi
last=$(ls -d "$ck"/ckpt-* | sort | tail -1)
if [[ -f $last/manifest.json ]] && grep -q '"epoch": *2' "$last/manifest.json"; then
  ok "the last checkpoint is the end of epoch 2"
else
  bad "last checkpoint: $(head -c 300 "$last/manifest.json")"
fi

# A restore with other data is refused at start: exit 2, one line naming the
# setting that differs, nothing written (no epoch, no checkpoint, no metrics).
before=$(ls -lR --time-style=+%s.%N "$ck")
"$bin" train "${job[@]}" --train-limit 3200 --epochs 3 --checkpoint-dir "$ck" \
  --resume --metrics-out "$tmp/refused.jsonl" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 && ! -s $tmp/out ]] \
   && grep -q "^actorps: error: $last/manifest.json: the checkpoint was written with other data: train limit 6400 in the checkpoint; train limit 3200 in this job; use --restore-variables-only to start a new run from its variables$" "$tmp/err" \
   && [[ ! -e $tmp/refused.jsonl && ! -e $tmp/refused.jsonl.tmp ]] \
   && [[ $(ls -lR --time-style=+%s.%N "$ck") == "$before" ]]; then
  ok "other data refused at start: $(cat "$tmp/err")"
else
  bad "other data: exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# --resume continues with epoch 3 only.
if "$bin" train "${job[@]}" --epochs 3 --checkpoint-dir "$ck" --resume \
     >"$tmp/out2" 2>"$tmp/err2"; then
  if grep -q 'resumed from .*: 2 epochs' "$tmp/err2" \
     && grep -q '^epoch   3/3' "$tmp/out2" && ! grep -q '^epoch   1/3' "$tmp/out2"; then
    ok "--resume runs epoch 3 only: $(grep '^epoch' "$tmp/out2")"
  else
    bad "--resume output: $(cat "$tmp/out2" "$tmp/err2")"
  fi
  # It goes on from the trained variables: its loss is below epoch 1's.
  l1=$(grep '^epoch   1/2' "$tmp/out1" | awk '{print $4}')
  l3=$(grep '^epoch   3/3' "$tmp/out2" | awk '{print $4}')
  if [[ -n $l1 && -n $l3 ]] && awk -v a="$l3" -v b="$l1" 'BEGIN { exit !(a < b) }'; then
    ok "resumed training loss $l3 is below the first epoch's $l1"
  else
    bad "resumed loss '$l3' vs first epoch '$l1'"
  fi
  # Its counts are this run's (100 closures), with the job's beside them
  # (300 since the start); with 2 ps, pushes == 2 x closures in both.
  line=$(grep '^closures:' "$tmp/out2")
  finished=$(echo "$line" | awk '{print $4}')
  applied=$(echo "$line" | sed -n 's/.*pushes: \([0-9]*\) applied.*/\1/p')
  job_closures=$(echo "$line" | sed -n 's/.*since the start of the job: \([0-9]*\) closures.*/\1/p')
  job_pushes=$(echo "$line" | sed -n 's/.*since the start of the job: [0-9]* closures, \([0-9]*\) pushes.*/\1/p')
  if [[ $finished == 100 && $applied == $((2 * finished)) && $job_closures == 300 \
        && $job_pushes == $((2 * job_closures)) ]] && [[ $line == *"(this run; "* ]]; then
    ok "resumed counts, this run and the job's: $line"
  else
    bad "resumed counts: $line"
  fi
else
  bad "--resume failed: $(cat "$tmp/err2")"
fi

# --restore-variables-only starts a new run from the variables of a
# checkpoint of other data and another optimizer: epochs from 1, its own
# checkpoints from step 0, and a first epoch better than a fresh run's.
new_job=(--train-limit 3200 --optimizer adagrad --epochs 1)
"$bin" train "${job[@]}" "${new_job[@]}" >"$tmp/fresh" 2>/dev/null
if "$bin" train "${job[@]}" "${new_job[@]}" --restore "$last" \
     --restore-variables-only --checkpoint-dir "$tmp/ft" \
     >"$tmp/out4" 2>"$tmp/err4"; then
  lf=$(grep '^epoch   1/1' "$tmp/fresh" | awk '{print $4}')
  lv=$(grep '^epoch   1/1' "$tmp/out4" | awk '{print $4}')
  if grep -q "new run from the variables of $last (step 200 of its run)" "$tmp/err4" \
     && [[ $(grep -c '^epoch' "$tmp/out4") -eq 1 ]] \
     && [[ $(ls "$tmp/ft") == ckpt-0000000050 ]] \
     && ! grep -q 'since the start of the job' "$tmp/out4" \
     && [[ -n $lf && -n $lv ]] && awk -v a="$lv" -v b="$lf" 'BEGIN { exit !(a < b) }'; then
    ok "--restore-variables-only: new run, first epoch loss $lv below a fresh run's $lf"
  else
    bad "--restore-variables-only: fresh '$lf', restored '$lv': $(cat "$tmp/out4" "$tmp/err4" | tail -5; ls "$tmp/ft")"
  fi
else
  bad "--restore-variables-only failed: $(cat "$tmp/err4")"
fi

# --restore of a mid-epoch checkpoint runs the rest of epoch 1: of 20, 40,
# 60, 80 and 100 (the epoch end) the oldest kept is step 60.
mid=$tmp/mid
"$bin" train "${job[@]}" --epochs 1 --checkpoint-dir "$mid" \
  --checkpoint-every 20 >/dev/null 2>&1
first=$(ls -d "$mid"/ckpt-* | sort | head -1)
if "$bin" train "${job[@]}" --epochs 1 --restore "$first" \
     >"$tmp/out3" 2>"$tmp/err3" \
   && grep -q 'resumed from .*: 0 epochs and 60 steps' "$tmp/err3"; then
  ok "--restore mid-epoch: $(grep -o 'resumed from.*' "$tmp/err3" | head -c 120)"
else
  bad "--restore mid-epoch: $(cat "$tmp/err3")"
fi

# expect_refused NAME PATTERN DIR: --restore DIR exits 2 naming PATTERN.
expect_refused() {
  local name=$1 pattern=$2 dir=$3
  shift 3
  "$bin" train "${job[@]}" --epochs 3 --restore "$dir" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -eq 2 ]] && grep -q -- "$pattern" "$tmp/err"; then
    ok "$name refused: $(head -c 200 "$tmp/err")"
  else
    bad "$name: exit $rc: $(cat "$tmp/err")"
  fi
}
cp -r "$last" "$tmp/flip"
f=$(ls "$tmp/flip"/*.bin | head -1)
printf '\x42' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_refused "a flipped byte" "$(basename "$f").*checksum" "$tmp/flip"
cp -r "$last" "$tmp/trunc"
f=$(ls "$tmp/trunc"/*.bin | tail -1)
truncate -s 50 "$f"
expect_refused "a truncated shard" "$(basename "$f")" "$tmp/trunc"
cp -r "$last" "$tmp/nomanifest"
rm "$tmp/nomanifest/manifest.json"
expect_refused "no manifest" "manifest.json" "$tmp/nomanifest"
expect_refused "another model" "written with another model: init seed 42 in the checkpoint; init seed 7 in this job$" "$last" --seed 7
expect_refused "another optimizer" "written with another optimizer: adam" "$last" --optimizer sgd
# Another number of ps alone re-shards (test/reshard_cli_test.sh); with
# another optimizer it is refused, both named.
expect_refused "another number of ps and optimizer" "another cluster (2 ps in the checkpoint; 3 ps in this job) and another optimizer (adam" "$last" --ps 3 --optimizer sgd
# A variables-only restore needs the same model (another number of ps is
# re-sharded), and a directory of its own for its checkpoints.
expect_refused "another model for its variables" "another model: .*needs the same model, variables and partitioning" \
  "$last" --seed 7 --restore-variables-only
expect_refused "another number of ps and model for its variables" "another model: .*needs the same model" \
  "$last" --ps 3 --seed 7 --restore-variables-only
expect_refused "a variables-only run among other checkpoints" "$ck already holds checkpoints of another run" \
  "$last" --restore-variables-only --checkpoint-dir "$ck"
"$bin" train "${job[@]}" --checkpoint-dir "$ck" --resume --restore-variables-only >/dev/null 2>"$tmp/err"
[[ $? -eq 2 ]] && grep -q -- "--restore-variables-only: starts a new run" "$tmp/err" \
  && ok "--restore-variables-only with --resume refused" || bad "--resume --restore-variables-only: $(cat "$tmp/err")"
expect_refused "a finished job" "has 2 epochs done" "$last" --epochs 2
"$bin" train "${job[@]}" --resume >/dev/null 2>"$tmp/err"
[[ $? -eq 2 ]] && grep -q -- "--resume: needs --checkpoint-dir" "$tmp/err" \
  && ok "--resume without a directory refused" || bad "--resume alone: $(cat "$tmp/err")"
# The refusals left the good checkpoints as they were.
if "$bin" train "${job[@]}" --epochs 3 --restore "$last" >/dev/null 2>&1; then
  ok "the original checkpoint still restores"
else
  bad "the original checkpoint no longer restores"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
