#!/usr/bin/env bash
# What a planned move of a parameter-server group costs: the longest time
# pushes to the moving group wait, for a group of about 1.3 million floats
# (an MLP 784-2048-512-10 on 2 ps) moved to a server that joins for it, in
# one process (`actorps train`) and, unless ONLY_TRAIN=1, as processes
# (`actorps launch`, 3 ps + 2 workers, a move between running servers).
# Then the final accuracy of Fashion-MNIST (the default MLP, 3 epochs) with
# and without a move in epoch 2, alternating, ROUNDS of each.
#
#   bench/move.sh [ROUNDS]      (ONLY_TRAIN=1: not under launch;
#                                ONLY_WAITS=1: no accuracy runs)
#
# Prints, per run: the dispatcher's wait (from the handoff's request to the
# new routes), the old server's (from the moment it stopped applying pushes
# to its drop of the group, which comes after the routes) and the longest a
# push waited before its worker sent it again to the new server (from its
# first send), then their largest values; and the accuracies with their
# medians.
# Needs build/actorps (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=build/actorps
[[ -x $bin ]] || { echo "bench/move.sh: build first (scripts/build.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's/"layers": \[784, 256, 128, 10\]/"layers": [784, 2048, 512, 10]/' \
  configs/fashion_mnist.json >"$tmp/wide.json"
grep -q '2048, 512' "$tmp/wide.json" \
  || { echo "bench/move.sh: configs/fashion_mnist.json's layers changed" >&2; exit 1; }

median() { sort -n | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
largest() { sort -n | tail -1; }

# waits LOG: "DISPATCHER_MS SERVER_MS WORKER_MS FLOATS" of the first move in
# LOG; WORKER_MS: the longest a push waited before a worker sent it again to
# the new server (0: no push was caught by the move).
waits() {
  local d s w f
  d=$(grep -o 'pushes to it waited [0-9.]* ms' "$1" | head -1 | awk '{print $5}')
  s=$(grep -o 'floats, [0-9]* table rows): its pushes waited [0-9.]* ms' "$1" \
      | head -1 | awk '{print $8}')
  w=$(grep -o 'is sent again to the new server after [0-9.]* ms' "$1" \
      | awk '{print $9}' | sort -n | tail -1)
  f=$(grep -o 'moved away (view [0-9]*; [0-9]* floats' "$1" | head -1 | awk '{print $5}')
  echo "${d:-none} ${s:-none} ${w:-0} ${f:-none}"
}

run() {
  local name=$1
  shift
  "$bin" "$@" >"$tmp/log" 2>&1 || {
    echo "bench/move.sh: $name failed:" >&2
    tail -5 "$tmp/log" >&2
    exit 1
  }
}

hows=(train)
[[ ${ONLY_TRAIN:-0} == 1 ]] || hows+=(launch)
for how in "${hows[@]}"; do
  : >"$tmp/$how.d"
  : >"$tmp/$how.s"
  : >"$tmp/$how.w"
  for ((i = 1; i <= rounds; i++)); do
    if [[ $how == train ]]; then
      run "train with a move" train --config "$tmp/wide.json" --epochs 1 \
        --train-limit 12800 --no-progress --ps 2 --fault join:ps@40 \
        --fault 'move:ps:0>2@60'
    else
      run "launch with a move" launch --config "$tmp/wide.json" --epochs 1 \
        --train-limit 12800 --no-progress --ps 3 --workers 2 \
        --fault 'move:ps:0>2@60'
    fi
    read -r d s w f <<<"$(waits "$tmp/log")"
    echo "$how round $i: group of $f floats moved; pushes waited $d ms (dispatcher), $s ms (old server), $w ms (longest push sent again by a worker)"
    echo "$d" >>"$tmp/$how.d"
    echo "$s" >>"$tmp/$how.s"
    echo "$w" >>"$tmp/$how.w"
  done
  echo "$how: longest wait $(largest <"$tmp/$how.d") ms (dispatcher), $(largest <"$tmp/$how.s") ms (old server), $(largest <"$tmp/$how.w") ms (a push sent again), over $rounds moves"
done

[[ ${ONLY_WAITS:-0} == 1 ]] && exit 0
: >"$tmp/acc.base"
: >"$tmp/acc.move"
for ((i = 1; i <= rounds; i++)); do
  for v in base move; do
    faults=()
    [[ $v == move ]] && faults=(--fault join:ps@1000 --fault 'move:ps:0>2@1200')
    run "accuracy $v" train --config configs/fashion_mnist.json --epochs 3 \
      --no-progress "${faults[@]}"
    a=$(sed -n 's/^done: .*test_accuracy \([0-9.]*\).*/\1/p' "$tmp/log")
    echo "accuracy round $i, $v: $a ($(grep -o 'closures: .*' "$tmp/log"))"
    echo "$a" >>"$tmp/acc.$v"
  done
done
echo "accuracy: median without a move $(median <"$tmp/acc.base"), with a move in epoch 2 $(median <"$tmp/acc.move")"
