#!/usr/bin/env bash
# Many async workers and staleness: the Fashion-MNIST job in one
# process with WORKERS workers under plain async (the divergence guard off,
# so that it runs to the end), async with staleness-aware steps
# (--staleness-aware), ssp with bound 2, and ssp with staleness-aware steps.
# Prints each run's final test accuracy and loss, or the guard's verdict
# when it is on (GUARD=1).
#
#   bench/staleness.sh [EPOCHS] [WORKERS...]
#
# EPOCHS default 3, WORKERS default "64 256". Needs build/actorps.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
shift || true
workers=("$@")
((${#workers[@]} > 0)) || workers=(64 256)
bin=build/actorps
[[ -x $bin ]] || { echo "bench/staleness.sh: build first (scripts/build.sh)" >&2; exit 1; }
guard=(--divergence-factor 0)
[[ ${GUARD:-0} == 1 ]] && guard=()
names=("async" "async + staleness-aware" "ssp 2" "ssp 2 + staleness-aware")
args=("--mode async" "--mode async --staleness-aware" "--mode ssp --staleness 2"
      "--mode ssp --staleness 2 --staleness-aware")
printf '%-8s %-26s %-10s %-10s %s\n' workers variant accuracy loss samples/s
for w in "${workers[@]}"; do
  for v in "${!names[@]}"; do
    read -r -a vargs <<<"${args[$v]}"
    out=$("$bin" train --config configs/fashion_mnist.json --workers "$w" \
      --epochs "$epochs" --no-progress "${guard[@]}" "${vargs[@]}" 2>&1) || true
    done_line=$(grep '^done:' <<<"$out" || true)
    if [[ -n $done_line ]]; then
      acc=$(sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p' <<<"$done_line")
      loss=$(sed -n 's/.*test_loss \([0-9.a-z]*\).*/\1/p' <<<"$done_line")
      sps=$(sed -n 's/.*samples\/s \([0-9.]*\).*/\1/p' <<<"$done_line")
      printf '%-8s %-26s %-10s %-10s %s\n' "$w" "${names[$v]}" "$acc" "$loss" "$sps"
    else
      printf '%-8s %-26s %s\n' "$w" "${names[$v]}" \
        "$(grep -o 'training diverged after [0-9]* steps\|failed: .*' <<<"$out" | head -1 | cut -c1-80)"
    fi
  done
done
