#!/usr/bin/env bash
# The shape of Li et al. (OSDI 2014) Fig. 13 under simulation, as
# docs/guide/simulation.md ("Bounded delay") shows it: a9a's sparse logistic
# regression on 4 machines, tau+1 workers per machine (bounded delay tau).
# As tau grows, idle time falls, and the virtual time until the test loss
# reaches 0.335 first falls, then rises again. Deterministic (one seed):
# the run is the same every time on one build.
# usage: sim_delay_test.sh ACTORPS_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
command -v jq >/dev/null || { echo "FAILED: needs jq"; exit 1; }
out=$(cd "$src" && ACTORPS=$bin DELAY=1 CONFIG=configs/a9a.json PS=2 \
  NET=1gbit,5ms COMPUTE=normal:2ms,0.5ms STRAGGLERS=0%:1x TRAIN_LIMIT=0 \
  TEST_LIMIT=0 EPOCHS=20 SEEDS=7 bash scripts/sim_ssp_sweep.sh 4 0.335 0 3 15 63 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAILED: the sweep exited $rc"; exit 1; }
# Rows: "tau T idle ttl final samples/s p90"; "never" counts as no end.
col() { awk -v t="$1" -v c="$2" '$1 == "tau" && $2 == t { v = $c; if (v == "never") v = 1e9; print v }' <<<"$out"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
failed=0
check() { # WHAT A B: A < B
  if [[ -n $2 && -n $3 ]] && lt "$2" "$3"; then echo "ok: $1 ($2 < $3)"
  else echo "FAILED: $1 ($2 < $3 does not hold)"; failed=1; fi
}
check "idle falls from tau 0 to 3" "$(col 3 3)" "$(col 0 3)"
check "idle falls from tau 3 to 15" "$(col 15 3)" "$(col 3 3)"
check "time to loss falls from tau 0 to 3" "$(col 3 4)" "$(col 0 4)"
check "time to loss falls from tau 3 to 15" "$(col 15 4)" "$(col 3 4)"
check "time to loss rises from tau 15 to 63" "$(col 15 4)" "$(col 63 4)"
exit $failed
