#!/usr/bin/env bash
# The shape of Li et al. (OSDI 2014) Fig. 13 under simulation (issue 13):
# Fashion-MNIST with WORKERS workers, a quarter of them stragglers, under ssp
# with growing staleness bounds (and async). For each bound: the mean share
# of the virtual time a worker was not computing (idle: waiting for the
# network or for the slowest worker), and the virtual time until the test
# loss first reaches TARGET (evaluated every STEPS steps per worker).
#
#   scripts/sim_ssp_sweep.sh [WORKERS] [TARGET] [BOUNDS...]
#
# WORKERS default 16, TARGET default 0.6, BOUNDS default "0 1 2 4 8 16 32";
# NET=RATE,LATENCY sets the network (default 10gbit,50us).
# Needs build/actorps and jq. Deterministic: the same arguments print the
# same table.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-16}
target=${2:-0.6}
shift 2 || shift $# || true
bounds=("$@")
((${#bounds[@]} > 0)) || bounds=(0 1 2 4 8 16 32)
bin=build/actorps
[[ -x $bin ]] || { echo "sim_ssp_sweep.sh: build first (scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "sim_ssp_sweep.sh: needs jq" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=(--config configs/fashion_mnist.json --workers "$workers" --ps 4
     --train-limit 30000 --test-limit 2000 --epochs 40 --steps-per-epoch 4
     --network "${NET:-10gbit,50us}" --compute normal:2ms,0.5ms --stragglers 25%:4x
     --seed 7 --quiet)
printf '%-8s %-9s %-14s %-12s %s\n' mode idle time_to_loss final_loss samples/s
run() { # NAME ARGS...
  local name=$1
  shift
  "$bin" simulate "${job[@]}" "$@" --out "$tmp/r.jsonl" >/dev/null
  local idle ttl final sps
  idle=$(jq -r 'select(.type=="summary") | (.idle | add / length)' "$tmp/r.jsonl")
  ttl=$(jq -s -r --argjson t "$target" \
    '[.[] | select(.type=="epoch" and .metrics.test_loss <= $t) | .virtual_s] | if length > 0 then (.[0] | tostring) else "never" end' \
    "$tmp/r.jsonl")
  final=$(jq -s -r '[.[] | select(.type=="epoch")] | last | .metrics.test_loss' "$tmp/r.jsonl")
  sps=$(jq -r 'select(.type=="summary") | .samples_per_s | floor' "$tmp/r.jsonl")
  printf '%-8s %-9.3f %-14s %-12.4f %s\n' "$name" "$idle" "$ttl" "$final" "$sps"
}
for s in "${bounds[@]}"; do
  run "ssp $s" --mode ssp --staleness "$s"
done
run async --mode async
