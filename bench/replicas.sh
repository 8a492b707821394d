#!/usr/bin/env bash
# What replicated shards cost: the Fashion-MNIST job without
# replicas, with chain replication and with async replication side by side,
# alternating (A B C A B C ...) so that a noisy machine affects all alike, in
# one process (`actorps train`) and as processes (`actorps launch`, 2 ps + 2
# workers). Prints each run's samples/s, then the medians and their ratios
# to the run without replicas.
#
#   bench/replicas.sh [ROUNDS] [EXTRA ARGS...]
#
# ROUNDS (default 5) pairs per mode; EXTRA ARGS go to every run (e.g.
# --train-limit 30000). Needs build/actorps (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
bin=build/actorps
[[ -x $bin ]] || { echo "bench/replicas.sh: build first (scripts/build.sh)" >&2; exit 1; }
job=(--config configs/fashion_mnist.json --epochs 2 --no-progress "$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# samples_per_s LOG: the job's overall samples/s (its "done:" line).
# Under launch the coordinator's lines carry a "[coordinator] " prefix.
samples_per_s() { sed -n 's/^\(\[coordinator\] \)\{0,1\}done: .*samples\/s \([0-9.]*\).*/\2/p' "$1"; }

median() { sort -n | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# The variants compared: name and the arguments that select it.
names=(none chain async)
args=("--replicas 0" "--replicas 1 --replication chain" "--replicas 1 --replication async")

for how in train launch; do
  extra=()
  [[ $how == launch ]] && extra=(--workers 2 --ps 2)
  for v in "${!names[@]}"; do : >"$tmp/$how.$v"; done
  for ((i = 1; i <= rounds; i++)); do
    for v in "${!names[@]}"; do
      read -r -a vargs <<<"${args[$v]}"
      "$bin" "$how" "${job[@]}" "${extra[@]}" "${vargs[@]}" >"$tmp/log" 2>&1 || {
        echo "bench_replicas.sh: $how ${args[$v]} failed:" >&2
        tail -5 "$tmp/log" >&2
        exit 1
      }
      s=$(samples_per_s "$tmp/log")
      [[ -n $s ]] || { echo "bench_replicas.sh: no samples/s in the $how log:" >&2; tail -3 "$tmp/log" >&2; exit 1; }
      echo "$how ${names[$v]} round $i: $s samples/s"
      echo "$s" >>"$tmp/$how.$v"
    done
  done
  m0=$(median <"$tmp/$how.0")
  for v in 1 2; do
    m=$(median <"$tmp/$how.$v")
    awk -v how="$how" -v n="${names[$v]}" -v a="$m0" -v b="$m" 'BEGIN {
      printf "%s: median samples/s without replicas %.0f, %s %.0f: ratio %.3f (%.1f%% slower)\n",
             how, a, n, b, b / a, 100 * (1 - b / a) }'
  done
done
