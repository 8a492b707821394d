#!/usr/bin/env bash
# The serving numbers of docs/measurements.md ("Serving"): trains a model
# briefly (the weights do not change the cost of a prediction), exports it,
# serves it on a free port of 127.0.0.1 and runs actorps-serve-load against
# it at batch 1 and batch 64 (instances per request), with one connection
# and with several, then once more with --batch-wait-us 0; prints one
# Markdown row per run. `reload`: the MLP served at batch 1 over 16
# connections while four newer checkpoints are exported into its folder,
# one a second; prints the load generator's line (failures, versions seen).
#
#   scripts/serve_bench.sh [MODEL [SECONDS]]     MODEL: mnist (default),
#                                                movielens or reload;
#                                                SECONDS per run (5)
set -uo pipefail
cd "$(dirname "$0")/.."
model=${1:-mnist}
seconds=${2:-5}
bin=build/actorps
load=build/actorps-serve-load
probe=build/test/actorps_predict_probe
for f in $bin $load $probe; do
  [[ -x $f ]] || { echo "$f: not built (cmake --build build --target actorps actorps-serve-load actorps_predict_probe)"; exit 2; }
done
case $model in
mnist) flags=(--config configs/fashion_mnist.json --train-limit 6400 --test-limit 1000) ;;
movielens)
  [[ -f data/movielens/movielens.csv ]] || scripts/export_movielens.sh
  flags=(--config configs/movielens.json --train-limit 20000 --test-limit 1000) ;;
reload) flags=(--config configs/fashion_mnist.json --train-limit 6400 --test-limit 1000) ;;
*) echo "MODEL: mnist, movielens or reload"; exit 2 ;;
esac
tmp=$(mktemp -d)
server=""
trap '[[ -n $server ]] && kill $server 2>/dev/null; rm -rf "$tmp"' EXIT
$bin train "${flags[@]}" --epochs 1 --checkpoint-dir "$tmp/ck" --checkpoint-every 20 \
  --quiet --no-progress >/dev/null
cks=("$tmp"/ck/ckpt-*)
$bin export "${flags[@]}" --checkpoint "${cks[0]}" --out "$tmp/m" >/dev/null
$probe "${flags[@]}" --checkpoint "$tmp/ck" --first 0 --count 1 | head -1 >"$tmp/b1.json"
$probe "${flags[@]}" --checkpoint "$tmp/ck" --first 0 --count 64 | head -1 >"$tmp/b64.json"

run() { # WAIT_US BATCH CONNECTIONS
  : >"$tmp/out" # (not left to the child: the loop below could read the last run's)
  $bin serve "$tmp/m" --port 0 --batch-wait-us "$1" >"$tmp/out" 2>/dev/null &
  server=$!
  local port=""
  until [[ -n $port ]]; do
    port=$(sed -nE 's|^serving ([^ ]+) .*:([0-9]+)/v1/models/.*|\2|p' "$tmp/out")
    sleep 0.1
  done
  local name
  name=$(sed -nE 's|^serving ([^ ]+) .*|\1|p' "$tmp/out")
  local j
  j=$($load --port "$port" --model "$name" --body "$tmp/b$2.json" \
        --connections "$3" --seconds "$seconds" 2>"$tmp/load.err" | tail -1)
  [[ -s $tmp/load.err ]] && cat "$tmp/load.err" >&2
  kill $server; wait $server || true
  server=""
  python3 - "$j" "$model" "$1" <<'EOF'
import json, sys
j = json.loads(sys.argv[1])
print(f"| {sys.argv[2]} | {j['instances_per_request']} | {j['connections']} | "
      f"{sys.argv[3]} | {j['p50_ms']:.2f} | {j['p99_ms']:.2f} | "
      f"{j['requests_per_second']:.0f} | "
      f"{j['requests_per_second'] * j['instances_per_request']:.0f} | {j['failed']} |")
EOF
}

if [[ $model == reload ]]; then
  : >"$tmp/out"
  $bin serve "$tmp/m" --port 0 --poll-ms 100 >"$tmp/out" 2>"$tmp/err" &
  server=$!
  port=""
  until [[ -n $port ]]; do
    port=$(sed -nE 's|^serving ([^ ]+) .*:([0-9]+)/v1/models/.*|\2|p' "$tmp/out")
    sleep 0.1
  done
  $load --port "$port" --model fashion_mnist --body "$tmp/b1.json" \
    --connections 16 --seconds "$seconds" --watch-versions | head -1 &
  pid=$!
  for ck in "${cks[@]:1:4}"; do
    sleep 1
    $bin export "${flags[@]}" --checkpoint "$ck" --out "$tmp/m" >/dev/null
  done
  wait $pid
  grep -E "serving|refused" "$tmp/err"
  exit
fi
echo "| model | batch | connections | batch wait (us) | p50 ms | p99 ms | requests/s | instances/s | failed |"
echo "|---|---|---|---|---|---|---|---|---|"
for batch in 1 64; do
  for c in 1 16; do
    run 2000 "$batch" "$c"
  done
  run 0 "$batch" 1
done
