#!/usr/bin/env bash
# Runs the whole benchmark suite on this machine and writes
# bench/results.json and docs/benchmarks.md (each with the machine it ran on):
# dense and sparse (embedding-table) pull/push with their limits, and training
# throughput. Extra arguments go to actorps-bench (e.g. --epochs 3,
# --sizes 1024,1048576, --sparse-sizes 1024,65536, --no-training).
# Takes about two minutes on 2 cores. Run from anywhere; builds first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh actorps-bench
mkdir -p bench docs
build/actorps-bench --out bench/results.json --markdown docs/benchmarks.md "$@"
