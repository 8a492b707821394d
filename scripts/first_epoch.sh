#!/usr/bin/env bash
# How long a fresh clone takes to its first epoch (docs/measurements.md, "The
# first build"): clones this repository's HEAD into DIR, runs
# scripts/build.sh there (or, with CMAKE_ARGS, configures with them and
# builds --target actorps), starts the quick start's job and stops it at its
# first epoch line. Prints the build time and the time to that line.
#
# usage: scripts/first_epoch.sh DIR [CMAKE_ARGS...]
#   e.g. scripts/first_epoch.sh /tmp/fe-plain -DACTORPS_UNITY_BUILD=OFF
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: first_epoch.sh DIR [CMAKE_ARGS...]}
shift
rm -rf "$dir"
git clone -q "$repo" "$dir" || exit 1
cd "$dir" || exit 1
start=$(date +%s.%N)
if (($# == 0)); then
  scripts/build.sh >build.log 2>&1
else
  scripts/setup.sh --build \
    && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >build.log 2>&1 \
    && cmake --build build -j"$(nproc)" --target actorps >>build.log 2>&1
fi || { echo "first_epoch.sh: the build failed: $(tail -5 build.log)" >&2; exit 1; }
built=$(date +%s.%N)
build/actorps train --config configs/fashion_mnist.json --no-progress >train.log 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  grep -q -E 'epoch +1/' train.log && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill $pid 2>/dev/null
wait $pid 2>/dev/null
epoch=$(date +%s.%N)
line=$(grep -m1 -E 'epoch +1/' train.log) \
  || { echo "first_epoch.sh: no epoch line: $(tail -3 train.log)" >&2; exit 1; }
awk -v d="$dir" -v a="$*" -v s="$start" -v b="$built" -v e="$epoch" -v l="$line" \
  'BEGIN { printf "%s (%s): build %.0f s, first epoch at %.0f s: %s\n", d, a, b - s, e - s, l }'
