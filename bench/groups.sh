#!/usr/bin/env bash
# A parameter server joining a job of 6 replica groups on 2 servers
# (--groups 6 --ps 2; the join moves 2 groups onto the new server) against
# the same run without the join, alternating (A B A B ...), same seeds, in
# one process (`actorps train`): MovieLens (configs/movielens.json, 3
# epochs of 312 closures, the join at closure 500) and the synthetic click
# log (configs/synthetic_ctr.json, 2 epochs of 1,000,000 examples, 1,952
# closures each, the join at closure 2900). With LAUNCH=1, MovieLens once
# more each way under `actorps launch` (TLS off).
#
#   bench/groups.sh [ROUNDS] [movielens|ctr|both]
#
# Prints per run the test AUC and samples/s, with the join the moves'
# count, floats, table rows and longest stall (the dispatcher's clock, from
# the handoff's request to the new routes) and the pushes applied; then per
# job the medians and the largest AUC difference within a pair.
# Needs build/actorps (scripts/build.sh) and, for MovieLens,
# data/movielens (scripts/export_movielens.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
which=${2:-both}
bin=build/actorps
[[ -x $bin ]] || { echo "bench/groups.sh: build first (scripts/build.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# field LOG NAME: the value after NAME on the summary's "done:" line.
field() { grep '^\(\[coordinator\] \)\?done:' "$1" | grep -o "$2 [0-9.]*" | awk '{print $2}'; }

# one JOB MODE HOW: runs JOB (movielens|ctr) with (join) or without (base)
# the join, under HOW (train|launch); prints "AUC SAMPLES_PER_S MOVES".
one() {
  local job=$1 mode=$2 how=$3 cfg at args
  case $job in
    movielens) cfg=configs/movielens.json at=500 ;;
    ctr) cfg=configs/synthetic_ctr.json at=2900 ;;
  esac
  args=(--config "$cfg" --ps 2 --groups 6)
  [[ $how == launch ]] && args+=(--workers 2 --tls off)
  [[ $mode == join ]] && args+=(--fault "join:ps@$at")
  "$bin" "$how" "${args[@]}" >"$tmp/log" 2>&1 || {
    echo "bench/groups.sh: $job $mode ($how) failed:" >&2
    tail -5 "$tmp/log" >&2
    exit 1
  }
  local auc sps moves pushes
  auc=$(field "$tmp/log" test_auc)
  sps=$(field "$tmp/log" samples/s)
  pushes=$(grep -o 'pushes: [0-9]* applied' "$tmp/log" | awk '{print $2}')
  moves=$(grep -o 'moves: .*' "$tmp/log" | sed 's/pushes to a moving group //' || true)
  echo "$auc $sps | $pushes pushes applied | ${moves:-no moves}"
}

jobs=()
case $which in
  both) jobs=(movielens ctr) ;;
  movielens | ctr) jobs=("$which") ;;
  *) echo "bench/groups.sh: movielens, ctr or both, not $which" >&2; exit 2 ;;
esac

for job in "${jobs[@]}"; do
  : >"$tmp/$job.base"
  : >"$tmp/$job.join"
  for ((r = 1; r <= rounds; ++r)); do
    for mode in base join; do
      line=$(one "$job" "$mode" train)
      echo "$job $mode round $r: $line"
      echo "$line" | awk '{print $1, $2}' >>"$tmp/$job.$mode"
    done
  done
  b_auc=$(awk '{print $1}' "$tmp/$job.base" | median)
  j_auc=$(awk '{print $1}' "$tmp/$job.join" | median)
  b_sps=$(awk '{print $2}' "$tmp/$job.base" | median)
  j_sps=$(awk '{print $2}' "$tmp/$job.join" | median)
  diff=$(paste "$tmp/$job.base" "$tmp/$job.join" \
         | awk '{d = $3 - $1; if (d < 0) d = -d; if (d > m) m = d} END {printf "%.4f", m}')
  echo "$job: median AUC without $b_auc, with the join $j_auc; largest" \
       "difference within a pair $diff; median samples/s $b_sps / $j_sps"
done

if [[ ${LAUNCH:-0} == 1 ]]; then
  for mode in base join; do
    echo "movielens $mode (launch): $(one movielens "$mode" launch)"
  done
fi
