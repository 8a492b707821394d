#!/usr/bin/env bash
# The simulator against reality: the Fashion-MNIST job with 2 ps
# and 1, 2 and 4 workers, run for real under `actorps launch` (processes on
# this machine, loopback, --tls off) and simulated with this machine's
# loopback (`--network 1000gbit,1us --host measured --compute measured`:
# every node on one host of this machine's cores, the CPU costs of
# messages and updates and the model's step measured here), alternating
# (A B A B) so that both see the same load. Prints, per worker count, the
# median samples/s of each and their ratio.
#
#   scripts/sim_validate.sh [ROUNDS] [WORKERS...]
#
# ROUNDS default 2, WORKERS default "1 2 4". Environment: ACTORPS (the
# binary, default build/actorps), LIMIT (training images, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
shift || true
workers=("$@")
[[ ${#workers[@]} -gt 0 ]] || workers=(1 2 4)
bin=${ACTORPS:-build/actorps}
limit=${LIMIT:-20000}
# One closure per worker on both sides: launch's default is 2, simulate's
# 1, and the table in docs/guide/simulation.md was measured with 1.
job=(--config configs/fashion_mnist.json --ps 2 --epochs 1
     --train-limit "$limit" --test-limit 1000 --closures-per-worker 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for ((r = 1; r <= rounds; ++r)); do
  for w in "${workers[@]}"; do
    "$bin" launch "${job[@]}" --workers "$w" --tls off >"$tmp/l" 2>&1 \
      || { echo "launch with $w workers failed:"; tail -5 "$tmp/l"; exit 1; }
    grep -o 'samples/s [0-9]*' "$tmp/l" | tail -1 | awk '{print $2}' \
      >>"$tmp/launch.$w"
    "$bin" simulate "${job[@]}" --workers "$w" --network 1000gbit,1us \
      --host measured --compute measured --quiet >"$tmp/s" 2>&1 \
      || { echo "simulate with $w workers failed:"; tail -5 "$tmp/s"; exit 1; }
    grep -o '([0-9]* samples/s)' "$tmp/s" | tr -d '(' | awk '{print $1}' \
      >>"$tmp/sim.$w"
    grep -o 'host: .*' "$tmp/s" >"$tmp/host"
  done
done
echo "| workers | launch samples/s | simulated samples/s | simulated / launch | runs |"
echo "|---:|---:|---:|---:|---|"
for w in "${workers[@]}"; do
  l=$(median <"$tmp/launch.$w")
  s=$(median <"$tmp/sim.$w")
  runs="launch $(paste -sd/ "$tmp/launch.$w"), simulated $(paste -sd/ "$tmp/sim.$w")"
  awk -v w="$w" -v l="$l" -v s="$s" -v runs="$runs" \
    'BEGIN {printf "| %d | %.0f | %.0f | %.2f | %s |\n", w, l, s, s / l, runs}'
done
echo
echo "last simulated $(cat "$tmp/host")"
