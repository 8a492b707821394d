#!/usr/bin/env bash
# Static slices against dynamic data shards (data.sharding): the
# Fashion-MNIST job both ways, alternating (A B A B ...) so that a noisy
# machine affects both alike, in one process (`actorps train`) and as
# processes (`actorps launch`, 2 ps + 2 workers). Prints each run's
# samples/s and test accuracy, then the medians and their ratios.
#
#   bench/sharding.sh [ROUNDS] [EXTRA ARGS...]
#
# ROUNDS (default 3) runs per variant; EXTRA ARGS go to every run (e.g.
# --epochs 2). Needs build/actorps (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
bin=build/actorps
[[ -x $bin ]] || { echo "bench/sharding.sh: build first (scripts/build.sh)" >&2; exit 1; }
job=(--config configs/fashion_mnist.json --no-progress "$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# done_field LOG FIELD: a number of the job's "done:" line (under launch the
# coordinator's lines carry a "[coordinator] " prefix).
done_field() { sed -n "s|^\(\[coordinator\] \)\{0,1\}done: .*$2 \([0-9.]*\).*|\2|p" "$1"; }

median() { sort -n | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

names=(static dynamic)
for how in train launch; do
  extra=()
  [[ $how == launch ]] && extra=(--workers 2 --ps 2)
  for v in "${names[@]}"; do : >"$tmp/$how.$v.s"; : >"$tmp/$how.$v.a"; done
  for ((i = 1; i <= rounds; i++)); do
    for v in "${names[@]}"; do
      "$bin" "$how" "${job[@]}" "${extra[@]}" --sharding "$v" >"$tmp/log" 2>&1 || {
        echo "bench/sharding.sh: $how --sharding $v failed:" >&2
        tail -5 "$tmp/log" >&2
        exit 1
      }
      s=$(done_field "$tmp/log" samples/s)
      a=$(done_field "$tmp/log" test_accuracy)
      [[ -n $s && -n $a ]] || { echo "bench/sharding.sh: no done line in the $how log:" >&2; tail -3 "$tmp/log" >&2; exit 1; }
      echo "$how $v round $i: $s samples/s, test accuracy $a"
      echo "$s" >>"$tmp/$how.$v.s"
      echo "$a" >>"$tmp/$how.$v.a"
    done
  done
  awk -v how="$how" -v s0="$(median <"$tmp/$how.static.s")" \
      -v s1="$(median <"$tmp/$how.dynamic.s")" \
      -v a0="$(median <"$tmp/$how.static.a")" \
      -v a1="$(median <"$tmp/$how.dynamic.a")" 'BEGIN {
    printf "%s: medians: static %.0f samples/s, accuracy %.4f; dynamic %.0f samples/s (ratio %.3f), accuracy %.4f\n",
           how, s0, a0, s1, s1 / s0, a1 }'
done
