#!/usr/bin/env bash
# End-to-end checks of the embedding-table jobs as a user runs them: a9a
# (sparse logistic regression), MovieLens (embedding + MLP) and the synthetic
# click log, in one process and under `launch`; their metric improves, only
# touched rows move, checkpoints and a killed ps work with tables; bad input
# gives one clear line and exit status 2.
# usage: sparse_test.sh ACTORPS_BINARY SOURCE_DIR CASE
#   CASE: a9a | movielens | movielens_launch | synthetic | tables_recover |
#         bad_input
set -u
bin=$1
src=$2
case_name=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

# metric FILE EPOCH NAME: the value of NAME in the epoch object EPOCH of a
# metrics file (JSON lines), or the final object for EPOCH "final".
metric() {
  local line
  if [[ $2 == final ]]; then
    line=$(grep '"type":"final"' "$1")
  else
    line=$(grep "\"epoch\":$2," "$1")
  fi
  grep -o "\"$3\":[-0-9.e+]*" <<<"$line" | head -1 | cut -d: -f2
}

# greater A B: whether A > B (decimal numbers).
greater() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# The MovieLens export (Debian's r-cran-dslabs, exported with Rscript).
movielens_dir() {
  if [[ -f $src/data/movielens/movielens.csv ]]; then
    echo "$src/data/movielens"
  else
    bash "$src/scripts/export_movielens.sh" "$tmp/movielens" >&2 || return 1
    echo "$tmp/movielens"
  fi
}

expect_input_error() {
  local name=$1 pattern=$2
  shift 2
  "$bin" train "$@" --no-progress >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then
    bad "$name: exit status $rc, expected 2 ($(head -c 300 "$tmp/err"))"
  elif [[ $(wc -l <"$tmp/err") -ne 1 ]]; then
    bad "$name: expected one line on stderr: $(head -c 300 "$tmp/err")"
  elif ! grep -q -- "$pattern" "$tmp/err"; then
    bad "$name: stderr does not mention '$pattern': $(cat "$tmp/err")"
  else
    ok "$name ($(cat "$tmp/err"))"
  fi
}

case $case_name in
a9a)
  if "$bin" train --config "$src/configs/a9a.json" --data-dir "$src/data/a9a" \
       --epochs 2 --no-progress --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1; then
    acc=$(metric "$tmp/m.jsonl" 2 test_accuracy)
    auc1=$(metric "$tmp/m.jsonl" 1 test_auc)
    loss1=$(metric "$tmp/m.jsonl" 1 test_loss)
    loss2=$(metric "$tmp/m.jsonl" 2 test_loss)
    # A model at its initial values (all zero) has log loss ln 2 = 0.693
    # and AUC 0.5.
    if greater "$acc" 0.84 && greater "$auc1" 0.85 && greater 0.45 "$loss1" \
       && greater "$loss1" "$loss2"; then
      ok "a9a: test accuracy $acc, AUC $auc1 after one epoch, test loss $loss1 -> $loss2"
    else
      bad "a9a: accuracy $acc, AUC $auc1, loss $loss1 -> $loss2: $(cat "$tmp/out")"
    fi
    rows=$(metric "$tmp/m.jsonl" final table_rows)
    if [[ $rows -gt 0 && $rows -le 123 ]]; then
      ok "a9a: the servers hold $rows of 123 feature rows"
    else
      bad "a9a: table rows $rows"
    fi
  else
    bad "a9a run failed: $(tail -5 "$tmp/out")"
  fi
  ;;
movielens)
  dir=$(movielens_dir) || { bad "movielens export failed"; dir=""; }
  if [[ -n $dir ]] && "$bin" train --config "$src/configs/movielens.json" \
       --data-dir "$dir" --epochs 2 --no-progress --metrics-out "$tmp/m.jsonl" \
       >"$tmp/out" 2>&1; then
    auc1=$(metric "$tmp/m.jsonl" 1 test_auc)
    auc2=$(metric "$tmp/m.jsonl" 2 test_auc)
    if greater "$auc1" 0.70 && greater "$auc2" "$auc1"; then
      ok "movielens: test AUC $auc1 -> $auc2"
    else
      bad "movielens: test AUC $auc1 -> $auc2: $(cat "$tmp/out")"
    fi
    moved=$(metric "$tmp/m.jsonl" final bytes_pulled_per_step)
    dense=$(metric "$tmp/m.jsonl" final dense_equivalent_bytes_per_step)
    if greater "$dense" 0 && greater "$(awk -v d="$dense" 'BEGIN{print d/50}')" "$moved"; then
      ok "movielens: $moved bytes pulled per step, $dense for dense variables"
    else
      bad "movielens: $moved bytes pulled per step against $dense dense"
    fi
  else
    bad "movielens run failed: $(tail -5 "$tmp/out" 2>/dev/null)"
  fi
  ;;
movielens_launch)
  dir=$(movielens_dir) || { bad "movielens export failed"; dir=""; }
  # With priority pulls: the rows go with the first slice of each server's
  # pull (this tower's layers are small enough to be one slice each).
  if [[ -n $dir ]] && timeout 120 "$bin" launch \
       --config "$src/configs/movielens.json" --data-dir "$dir" --epochs 2 \
       --priority-pulls \
       --no-progress --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1; then
    auc1=$(metric "$tmp/m.jsonl" 1 test_auc)
    auc2=$(metric "$tmp/m.jsonl" 2 test_auc)
    pushes=$(metric "$tmp/m.jsonl" final pushes)
    closures=$(metric "$tmp/m.jsonl" final closures)
    if greater "$auc1" 0.70 && greater "$auc2" "$auc1" \
       && [[ $pushes -eq $((2 * closures)) ]]; then
      ok "movielens under launch: test AUC $auc1 -> $auc2, $pushes pushes for $closures closures"
    else
      bad "movielens under launch: AUC $auc1 -> $auc2, pushes $pushes, closures $closures: $(tail -5 "$tmp/out")"
    fi
  else
    bad "movielens under launch failed: $(tail -5 "$tmp/out" 2>/dev/null)"
  fi
  ;;
synthetic)
  # A small click log: 40,000 rows per epoch, tables of up to 10^7 keys.
  sed -e 's/"rows_per_epoch": [0-9]*/"rows_per_epoch": 40000/' \
      -e 's/"test_rows": [0-9]*/"test_rows": 4000/' \
      "$src/configs/synthetic_ctr.json" >"$tmp/ctr.json"
  if "$bin" train --config "$tmp/ctr.json" --epochs 2 --no-progress \
       --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1; then
    auc1=$(metric "$tmp/m.jsonl" 1 test_auc)
    auc2=$(metric "$tmp/m.jsonl" 2 test_auc)
    moved=$(metric "$tmp/m.jsonl" final bytes_pulled_per_step)
    dense=$(metric "$tmp/m.jsonl" final dense_equivalent_bytes_per_step)
    rows=$(metric "$tmp/m.jsonl" final table_rows)
    if greater "$auc1" 0.55 && greater "$auc2" "$auc1"; then
      ok "synthetic: test AUC $auc1 -> $auc2"
    else
      bad "synthetic: test AUC $auc1 -> $auc2: $(tail -5 "$tmp/out")"
    fi
    # The tables hold 41.6M keys x 16 floats (2.7 GB) if dense.
    if greater "$dense" 1000000000 && greater 5000000 "$moved" \
       && greater 2000000 "$rows"; then
      ok "synthetic: $moved bytes pulled per step against $dense for dense variables; $rows rows held"
    else
      bad "synthetic: moved $moved, dense $dense, rows $rows"
    fi
  else
    bad "synthetic run failed: $(tail -5 "$tmp/out")"
  fi
  ;;
tables_recover)
  # Checkpoints of tables; a ps killed mid-run comes back from one.
  dir=$(movielens_dir) || { bad "movielens export failed"; dir=""; }
  [[ -n $dir ]] || exit 1
  if "$bin" train --config "$src/configs/movielens.json" --data-dir "$dir" \
       --epochs 2 --no-progress --checkpoint-dir "$tmp/ck" --checkpoint-every 100 \
       --fault kill:ps:1@250 --metrics-out "$tmp/m.jsonl" >"$tmp/out" 2>&1; then
    pushes=$(metric "$tmp/m.jsonl" final pushes)
    lost=$(metric "$tmp/m.jsonl" final updates_lost)
    closures=$(metric "$tmp/m.jsonl" final closures)
    if [[ $((pushes + lost)) -eq $((2 * closures)) && $lost -gt 0 && $lost -le 100 ]] \
       && grep -q "shards placed on ps 1 restored from" "$tmp/out"; then
      ok "a killed ps with table shards restored: $pushes applied + $lost lost = 2 x $closures"
    else
      bad "recovery accounting: pushes $pushes, lost $lost, closures $closures: $(grep -E 'lost|restored' "$tmp/out")"
    fi
  else
    bad "run with a killed ps failed: $(tail -5 "$tmp/out")"
  fi
  if "$bin" train --config "$src/configs/movielens.json" --data-dir "$dir" \
       --epochs 3 --no-progress --checkpoint-dir "$tmp/ck" --resume \
       --metrics-out "$tmp/r.jsonl" >"$tmp/out" 2>&1 \
     && grep -q "resumed from .*ckpt-0000000624" "$tmp/out"; then
    auc=$(metric "$tmp/r.jsonl" 3 test_auc)
    if greater "$auc" 0.74; then
      ok "resumed from the epoch-2 checkpoint with tables: AUC $auc after epoch 3"
    else
      bad "resumed run: AUC $auc"
    fi
  else
    bad "resume failed: $(tail -5 "$tmp/out")"
  fi
  ;;
bad_input)
  mkdir -p "$tmp/a9a"
  cp "$src/data/a9a/a9a.t.gz" "$tmp/a9a/"
  { zcat "$src/data/a9a/a9a.gz" | head -100
    echo "1 3:1 x:1"
    zcat "$src/data/a9a/a9a.gz" | tail -n +101; } | gzip >"$tmp/a9a/a9a.gz"
  expect_input_error "a malformed LIBSVM line" "a9a.gz:101" \
    --config "$src/configs/a9a.json" --data-dir "$tmp/a9a"
  { zcat "$src/data/a9a/a9a.gz" | head -5; echo "0 5:1 3:1"; } | gzip >"$tmp/a9a/a9a.gz"
  expect_input_error "indices out of order" "a9a.gz:6" \
    --config "$src/configs/a9a.json" --data-dir "$tmp/a9a"
  { echo "1 124:1"; } | gzip >"$tmp/a9a/a9a.gz"
  expect_input_error "an index past the 123 features" "124" \
    --config "$src/configs/a9a.json" --data-dir "$tmp/a9a"
  expect_input_error "a missing MovieLens export names the command" \
    "scripts/export_movielens.sh" \
    --config "$src/configs/movielens.json" --data-dir "$tmp/nowhere"
  dir=$(movielens_dir) || dir=$tmp/nowhere
  sed 's/"embedding_dim": 16/"embedding_dimension": 16/' \
    "$src/configs/movielens.json" >"$tmp/ml.json"
  expect_input_error "an unknown model field" \
    "ml.json: model.embedding_dimension: unknown field" --config "$tmp/ml.json" \
    --data-dir "$dir"
  sed 's/"layers": \[64, 64, 32, 1\]/"layers": [60, 64, 32, 1]/' \
    "$src/configs/movielens.json" >"$tmp/ml2.json"
  expect_input_error "layers that do not fit the tables" "model.layers\[0\]" \
    --config "$tmp/ml2.json" --data-dir "$dir"
  expect_input_error "an unknown table rule" "table_optimizer.type" \
    --config "$src/configs/a9a.json" --table-optimizer rmsprop
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac

echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
