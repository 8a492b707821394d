#!/usr/bin/env bash
# Installs the Debian packages (scripts/setup.sh) and builds actorps in
# ./build (Release, -O3 -march=native).
#
#   scripts/build.sh           the actorps program only (what the quick start
#                              runs; the packages for it only)
#   scripts/build.sh --all     everything: the tests, examples, benchmarks and
#                              the fuzz corpus replay (the packages the tests
#                              need too): what ctest runs
#   scripts/build.sh TARGET... these CMake targets (e.g. actorps-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(--target actorps)
setup=(--build)
if [[ ${1:-} == --all ]]; then
  targets=()
  setup=()
elif (($# > 0)); then
  targets=(--target "$@")
fi
scripts/setup.sh "${setup[@]}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
