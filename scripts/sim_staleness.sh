#!/usr/bin/env bash
# Many async workers and staleness, in the simulator: the
# simulated counterpart of bench/staleness.sh. The Fashion-MNIST job
# (configs/fashion_mnist.json: the MLP and Adam) under `actorps simulate`
# with WORKERS workers and PS parameter servers, each worker on a machine of
# its own, in four settings: async, async with staleness-aware steps
# (--staleness-aware), ssp with bound 2, and ssp 2 with staleness-aware
# steps. Prints a markdown table: final test accuracy and loss, the virtual
# samples/s, the median staleness of the applied pushes (as its histogram
# bucket) and the wall time of each run.
#
#   scripts/sim_staleness.sh [EPOCHS] [WORKERS...]
#
# EPOCHS default 3, WORKERS default "64 256". Environment:
#   ACTORPS   the binary (default build/actorps)
#   PS        parameter servers (default 8)
#   NET       --network (default 10gbit,50us)
#   COMPUTE   --compute (default normal:3ms,0.5ms: about what `measured`
#             gives for this model on a 2-core host, but deterministic)
#   SEED      --seed (default 7; also the model's initial values)
#   GUARD=1   keep the divergence guard on (default off, as in
#             bench_staleness.sh, so that every run goes to the end)
# Needs jq. Deterministic: the same arguments print the same table (but the
# wall times; with the same binary path and environment: see "Float
# rounding" in docs/guide/simulation.md).
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
shift || true
workers=("$@")
((${#workers[@]} > 0)) || workers=(64 256)
bin=${ACTORPS:-build/actorps}
[[ -x $bin ]] || { echo "sim_staleness.sh: no $bin (build first: scripts/build.sh, or set ACTORPS)" >&2; exit 1; }
command -v jq >/dev/null || { echo "sim_staleness.sh: needs jq" >&2; exit 1; }
guard=(--divergence-factor 0)
[[ ${GUARD:-0} == 1 ]] && guard=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
names=("async" "async + staleness-aware" "ssp 2" "ssp 2 + staleness-aware")
args=("--mode async" "--mode async --staleness-aware" "--mode ssp --staleness 2"
      "--mode ssp --staleness 2 --staleness-aware")
buckets='["0","1","2","3-4","5-8","9-16","17-32","33-64","65-128",">128"]'
echo "| workers | setting | test accuracy | test loss | samples/s (virtual) | median staleness | wall s |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for w in "${workers[@]}"; do
  for v in "${!names[@]}"; do
    read -r -a vargs <<<"${args[$v]}"
    rm -f "$tmp/r.jsonl"
    start=$(date +%s.%N)
    "$bin" simulate --config configs/fashion_mnist.json --workers "$w" \
      --ps "${PS:-8}" --epochs "$epochs" --network "${NET:-10gbit,50us}" \
      --compute "${COMPUTE:-normal:3ms,0.5ms}" --seed "${SEED:-7}" --quiet \
      "${guard[@]}" "${vargs[@]}" --out "$tmp/r.jsonl" >"$tmp/out" 2>&1 || true
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    if [[ -s $tmp/r.jsonl ]] && jq -e 'select(.type=="summary")' "$tmp/r.jsonl" >/dev/null; then
      jq -s -r --arg w "$w" --arg n "${names[$v]}" --arg wall "$wall" --argjson b "$buckets" '
        ([.[] | select(.type=="epoch")] | last) as $e
        | (.[] | select(.type=="summary")) as $s
        | ($s.staleness_buckets | add) as $total
        | ([foreach $s.staleness_buckets[] as $c (0; . + $c; .)]
           | map(. * 2 >= $total) | index(true)) as $med
        | "| \($w) | \($n) | \($e.metrics.test_accuracy // "nan") | \($e.metrics.test_loss | if . == null then "nan" else . * 1000 | round / 1000 end)"
          + " | \($s.samples_per_s | round) | \($b[$med]) | \($wall | tonumber | . * 10 | round / 10) |"' \
        "$tmp/r.jsonl"
    else
      printf '| %s | %s | %s | | | | %.1f |\n' "$w" "${names[$v]}" \
        "$(grep -o 'diverged.*\|failed: .*' "$tmp/out" | head -1 | cut -c1-80)" "$wall"
    fi
  done
done
