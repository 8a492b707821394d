#!/usr/bin/env bash
# The shape of Li et al. (OSDI 2014) Fig. 13 under simulation:
# Fashion-MNIST with WORKERS workers, a quarter of them stragglers, under ssp
# with growing staleness bounds (and async). For each bound: the mean share
# of the virtual time a worker was not computing (idle: waiting for the
# network or for the slowest worker), and the virtual time until the test
# loss first reaches TARGET (evaluated every STEPS steps per worker).
#
#   scripts/sim_ssp_sweep.sh [WORKERS] [TARGET] [BOUNDS...]
#
# WORKERS default 16, TARGET default 0.6, BOUNDS default "0 1 2 4 8 16 32";
# async is always run last (ASYNC=0: not).
#
# DELAY=1: Li et al.'s own x-axis, bounded delay tau, instead of the ssp
# bound. WORKERS is then the number of machines and BOUNDS are values of
# tau (default "0 1 3 7 15 31 63"): each machine runs tau+1 workers
# (--workers-per-machine), which share its link and compute one step at a
# time, so tau+1 tasks are in flight per machine; mode async. STEPS is per
# machine and must be a multiple of every tau+1 (default 64), so that every
# run evaluates after the same number of steps.
#
# Environment (defaults in
# brackets; the defaults are the setup of docs/guide/simulation.md's first tables):
#   ACTORPS      the binary [build/actorps]
#   CONFIG       the job [configs/fashion_mnist.json]
#   PS [4]  NET [10gbit,50us]  COMPUTE [normal:2ms,0.5ms]  STRAGGLERS [25%:4x]
#   TRAIN_LIMIT [30000]  TEST_LIMIT [2000]
#   EPOCHS [40]  STEPS [4]: the test loss is evaluated after every STEPS
#                steps per worker (an epoch; an epoch's end waits for all
#                of its steps), EPOCHS times
#   OPTIMIZER, LR, BATCH  --optimizer, --learning-rate, --batch-size [the
#                config's]
#   EXTRA        more flags for every run (e.g. --staleness-aware)
#   GUARD [on]   GUARD=0: --divergence-factor 0 (a diverged run otherwise
#                stops, and counts as never reaching TARGET)
#   SEEDS [7]    several ("7 8 9"): each bound runs once per seed; the
#                columns are means over the seeds (time to loss over the
#                seeds that reached it, "never" if none did), and the last
#                column lists each seed's time to loss
#   SMOOTH [1]   the criterion uses the mean of the last SMOOTH evaluations
#   STAY [0]     STAY=1: the time from which the (smoothed) test loss stays
#                at or below TARGET to the end (not the first time it is)
#   KEEP=DIR     keep each run's report there (MODE.sSEED.jsonl)
# "p90 stale" is the staleness bucket that holds the 90th percentile of the
# applied pushes. Needs jq. Deterministic: the same arguments print the same
# table (with the same binary path and environment: see "Float rounding" in
# docs/guide/simulation.md).
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-16}
target=${2:-0.6}
shift 2 || shift $# || true
bounds=("$@")
bin=${ACTORPS:-build/actorps}
[[ -x $bin ]] || { echo "sim_ssp_sweep.sh: no $bin (build first: scripts/build.sh, or set ACTORPS)" >&2; exit 1; }
command -v jq >/dev/null || { echo "sim_ssp_sweep.sh: needs jq" >&2; exit 1; }
read -r -a seeds <<<"${SEEDS:-7}"
smooth=${SMOOTH:-1}
stay=${STAY:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
delay=${DELAY:-0}
if ((delay)); then
  ((${#bounds[@]} > 0)) || bounds=(0 1 3 7 15 31 63)
  steps=${STEPS:-64}
  for t in "${bounds[@]}"; do
    ((steps % (t + 1) == 0)) || { echo "sim_ssp_sweep.sh: STEPS=$steps is not a multiple of tau+1=$((t + 1))" >&2; exit 2; }
  done
else
  ((${#bounds[@]} > 0)) || bounds=(0 1 2 4 8 16 32)
  steps=${STEPS:-4}
fi
job=(--config "${CONFIG:-configs/fashion_mnist.json}" --ps "${PS:-4}"
     --train-limit "${TRAIN_LIMIT:-30000}" --test-limit "${TEST_LIMIT:-2000}"
     --epochs "${EPOCHS:-40}"
     --network "${NET:-10gbit,50us}" --compute "${COMPUTE:-normal:2ms,0.5ms}"
     --stragglers "${STRAGGLERS:-25%:4x}" --quiet)
[[ -n ${OPTIMIZER:-} ]] && job+=(--optimizer "$OPTIMIZER")
[[ -n ${LR:-} ]] && job+=(--learning-rate "$LR")
[[ -n ${BATCH:-} ]] && job+=(--batch-size "$BATCH")
[[ -n ${EXTRA:-} ]] && { read -r -a extra <<<"$EXTRA"; job+=("${extra[@]}"); }
[[ ${GUARD:-1} == 0 ]] && job+=(--divergence-factor 0)
buckets='["0","1","2","3-4","5-8","9-16","17-32","33-64","65-128",">128"]'
[[ -n ${KEEP:-} ]] && mkdir -p "$KEEP"
# One run's line: ttl idle final_loss samples/s p90_bucket (ttl "never",
# final "diverged" when the run failed or its loss is NaN; a NaN loss, null
# in the report, never counts as reaching TARGET).
one() { # NAME SEED ARGS...
  local name=$1 seed=$2
  shift 2
  rm -f "$tmp/r.jsonl"
  "$bin" simulate "${job[@]}" --seed "$seed" "$@" --out "$tmp/r.jsonl" >"$tmp/out" 2>&1 || true
  [[ -n ${KEEP:-} && -f $tmp/r.jsonl ]] && cp "$tmp/r.jsonl" "$KEEP/${name// /}.s$seed.jsonl"
  if ! jq -e 'select(.type=="summary")' "$tmp/r.jsonl" >/dev/null 2>&1; then
    echo "never nan diverged nan -"
    return
  fi
  jq -s -r --argjson t "$target" --argjson k "$smooth" --argjson stay "$stay" --argjson b "$buckets" '
    [.[] | select(.type=="epoch")] as $e
    | [range(0; $e | length) as $i
       | ($e[([0, $i - $k + 1] | max):$i + 1] | map(.metrics.test_loss // 1e308) | add / length) as $m
       | {t: $e[$i].virtual_s, ok: ($m <= $t)}] as $c
    | (if $stay == 1 then
         ([$c | to_entries[] | select(.value.ok | not) | .key] | max) as $last
         | (if $last == null then $c[0].t
            elif $last + 1 < ($c | length) then $c[$last + 1].t else null end)
       else ([$c[] | select(.ok) | .t] | first) end) as $ttl
    | (.[] | select(.type=="summary")) as $s
    | ($s.staleness_buckets | add) as $n
    | ([foreach $s.staleness_buckets[] as $x (0; . + $x; .)] | map(. >= 0.9 * $n) | index(true)) as $p90
    | "\($ttl // "never") \($s.idle | add / length) \($e | last | .metrics.test_loss // "diverged") \($s.samples_per_s) \($b[$p90])"' \
    "$tmp/r.jsonl"
}
printf '%-8s %-9s %-14s %-12s %-10s %-10s %s\n' mode idle time_to_loss final_loss samples/s "p90 stale" \
  "$( ((${#seeds[@]} > 1)) && echo "per seed")"
run() { # NAME ARGS...
  local name=$1
  shift
  local lines=() seed
  for seed in "${seeds[@]}"; do
    lines+=("$(one "$name" "$seed" "$@")")
  done
  printf '%s\n' "${lines[@]}" | awk -v name="$name" -v many=$((${#seeds[@]} > 1)) '
    { if ($1 != "never") { ttl += $1; reached++ }
      per = per (NR > 1 ? "/" : "") ($1 == "never" ? "never" : sprintf("%.3f", $1))
      if ($3 == "diverged") { div++ } else { idle += $2; fin += $3; sps += $4; ok++ }
      p90 = $5 }
    END {
      t = reached ? sprintf("%.3f", ttl / reached) : "never"
      if (many && reached && reached < NR) t = t " (" reached "/" NR ")"
      f = ok ? sprintf("%.4f", fin / ok) : "diverged"
      if (div && ok) f = f " (" div " div.)"
      printf "%-8s %-9s %-14s %-12s %-10s %-10s %s\n", name, ok ? sprintf("%.3f", idle / ok) : "-", t, f,
        ok ? sprintf("%d", sps / ok) : "-", p90, many ? per : "" }'
}
if ((delay)); then
  for t in "${bounds[@]}"; do
    run "tau $t" --mode async --workers $((workers * (t + 1))) --workers-per-machine $((t + 1)) \
      --steps-per-epoch $((steps / (t + 1)))
  done
  exit 0
fi
for s in "${bounds[@]}"; do
  run "ssp $s" --mode ssp --staleness "$s" --workers "$workers" --steps-per-epoch "$steps"
done
[[ ${ASYNC:-1} == 0 ]] || run async --mode async --workers "$workers" --steps-per-epoch "$steps"
