#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) and runs each for a
# given time, then prints a table: executions, exec/s, coverage (libFuzzer's
# cov: edges, ft: features), corpus size, CPU time and crashes per target.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS (default 60) is each target's -max_total_time; TARGET names are
# those of fuzz/<name>_fuzz.cpp (default: all). One fuzzer process runs per
# target, FUZZ_PARALLEL of them at once (default: the number of cores), so a
# target gets SECONDS of one core.
#
# Environment:
#   FUZZ_BUILD     build directory (default build-fuzz), configured with
#                  CC=clang CXX=clang++ -DACTORPS_FUZZ=ON
#   FUZZ_PARALLEL  targets run at once (default: nproc)
#   FUZZ_FLAGS     extra libFuzzer flags (e.g. "-malloc_limit_mb=256")
#   FUZZ_NO_BUILD  set to 1 to run the fuzzers already built
#
# Inputs: the seed corpus fuzz/corpus/TARGET (read only) and the working
# corpus FUZZ_BUILD/corpus/TARGET (new inputs go there, and a later run goes
# on from it). Crashes, leaks, timeouts and out-of-memory inputs are written
# to FUZZ_BUILD/artifacts/TARGET/; each fuzzer's output is in
# FUZZ_BUILD/logs/TARGET.log. To keep a crash as a regression test, minimise
# it (FUZZ_BUILD/fuzz/fuzz_TARGET -minimize_crash=1 -runs=10000 FILE) and
# copy it into fuzz/corpus/TARGET/: the ctest fuzz.replay.TARGET replays it.
# fuzz/keep_corpus.py TARGET... keeps a few of the new inputs there too.
# Results of the last campaign: docs/fuzzing.md.
#
# Exit status: 0 if no target crashed, 1 otherwise, 2 for bad arguments.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${1:-60}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || {
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
}
shift || true

all_targets=()
for f in fuzz/*_fuzz.cpp; do
  n=${f#fuzz/}
  all_targets+=("${n%_fuzz.cpp}")
done
targets=("$@")
((${#targets[@]} > 0)) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ -f fuzz/${t}_fuzz.cpp ]] || {
    echo "fuzz.sh: unknown target \"$t\" (known: ${all_targets[*]})" >&2
    exit 2
  }
done

build=${FUZZ_BUILD:-build-fuzz}
parallel=${FUZZ_PARALLEL:-$(nproc)}
read -r -a extra <<<"${FUZZ_FLAGS:-}"

command -v clang++ >/dev/null || {
  echo "fuzz.sh: clang++ not found (scripts/setup.sh --fuzz installs it)" >&2
  exit 2
}
if [[ ${FUZZ_NO_BUILD:-0} != 1 ]]; then
  if [[ ! -f $build/CMakeCache.txt ]]; then
    CC=clang CXX=clang++ cmake -S . -B "$build" -DACTORPS_FUZZ=ON \
      -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  else
    # Configured before: again, so that a target added since is known.
    cmake -S . -B "$build" >/dev/null
  fi
  build_targets=()
  for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
  cmake --build "$build" -j"$(nproc)" "${build_targets[@]}"
fi

mkdir -p "$build/logs"

# Runs one target; its log ends with bash's CPU time line "cpu USER SYS".
run_one() {
  local t=$1
  local corpus=$build/corpus/$t artifacts=$build/artifacts/$t/
  mkdir -p "$corpus" "$artifacts"
  local log=$build/logs/$t.log
  local TIMEFORMAT='cpu %U %S'
  touch "$build/logs/$t.start"
  {
    time "$build/fuzz/fuzz_$t" -max_total_time="$seconds" \
      -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" "${extra[@]}" \
      "$corpus" "fuzz/corpus/$t"
  } >"$log" 2>&1 || true
}

echo "fuzz.sh: ${#targets[@]} target(s), ${seconds} s each, $parallel at once;" \
     "logs in $build/logs/" >&2
running=0
for t in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz.sh: fuzzing $t" >&2
  run_one "$t" &
  running=$((running + 1))
done
wait

crashed=0
printf '%-20s %12s %8s %7s %7s %7s %8s  %s\n' target executions exec/s cov ft \
  corpus cpu-min crashes
for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  cpu=$(awk '/^cpu /{printf "%.1f", ($2 + $3) / 60}' "$log" || true)
  found=$(find "$build/artifacts/$t" -type f -newer "$build/logs/$t.start" | wc -l)
  status=$found
  if grep -qE '^==[0-9]+==ERROR|^SUMMARY: |deadly signal|fuzz check failed' "$log"; then
    status="$found (see $log)"
    crashed=1
  elif ((found > 0)); then
    crashed=1
  fi
  printf '%-20s %12s %8s %7s %7s %7s %8s  %s\n' "$t" "${execs:--}" "${rate:--}" \
    "${cov:--}" "${ft:--}" "${corp:--}" "${cpu:--}" "$status"
done
exit $crashed
