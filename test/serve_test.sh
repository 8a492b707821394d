#!/usr/bin/env bash
# Serving end to end with the actorps binary: train a little with a
# checkpoint, `actorps export`, `actorps serve` in the background on a free
# port of 127.0.0.1, curl.
#   mnist      Fashion-MNIST's MLP: curl of three test examples answers the
#              class probabilities the evaluator's path computes from the
#              checkpoint (test/tools/predict_probe.cpp), within 1e-6
#   a9a        the same for sparse logistic regression (weighted keys)
#   movielens  the same for embedding_mlp (four fields, multi-hot genres)
#   reload     a newer export swapped in while actorps-serve-load hammers
#              the server: 0 failed requests, both versions answered; a
#              version with a bad checksum refused with a line naming the
#              file, the previous one serving on
#   bad_input  flags, a MODEL_DIR without versions, a taken port (exit 2),
#              and bad requests answered with 4xx JSON errors
#   tls        --tls-dir with `actorps certs`' certificates: HTTPS, and
#              --tls-mutual refusing a client without a certificate
# No assertion is timed: every wait polls until a condition holds or the
# process it waits for has ended.
#
#   test/serve_test.sh BUILD/actorps SOURCE_DIR CASE PROBE [LOAD]
set -uo pipefail
bin=${1:?usage: serve_test.sh ACTORPS SOURCE_DIR CASE PROBE [LOAD]}
src=${2:?}
case=${3:?}
probe=${4:?}
load=${5:-}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; failed=1; }

# serve DIR [flags]: starts actorps serve on a free port, sets $serve_pid
# and $port once it listens (fails if it exits first).
serve() {
  local dir=$1
  shift
  # Emptied here, not by the child's redirection: the loop below could read
  # the port of the server before.
  : >"$tmp/serve.out"
  : >"$tmp/serve.err"
  "$bin" serve "$dir" --port 0 "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  serve_pid=$!
  pids+=("$serve_pid")
  port=""
  while [[ -z $port ]]; do
    port=$(sed -nE 's|^serving .* on https?://[^:]*:([0-9]+)/v1/models/.*|\1|p' "$tmp/serve.out")
    [[ -n $port ]] && return 0
    kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.err"; return 1; }
    sleep 0.1
  done
}

# close A B TOL: whether the JSON predictions A and B (numbers or lists of
# numbers) are equal within TOL everywhere.
close() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
a, b, tol = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
flat = lambda x: [v for r in x for v in (r if isinstance(r, list) else [r])]
fa, fb = flat(a), flat(b)
worst = max(abs(x - y) for x, y in zip(fa, fb)) if fa else 0
print(f"{len(fa)} numbers, largest difference {worst:.3g}")
sys.exit(0 if len(fa) == len(fb) and len(a) == len(b) and worst <= tol else 1)
EOF
}

# end_to_end NAME CONFIG [job flags]: train 1 epoch with a checkpoint,
# export, serve, and compare a curl of test examples 0..2 with the probe.
end_to_end() {
  local name=$1 config=$2
  shift 2
  local flags=(--config "$config" "$@")
  "$bin" train "${flags[@]}" --epochs 1 --checkpoint-dir "$tmp/ck" --quiet \
    --no-progress >"$tmp/train.out" 2>&1 || { bad "$name: train failed"; cat "$tmp/train.out"; return; }
  "$bin" export "${flags[@]}" --checkpoint "$tmp/ck" --out "$tmp/m" \
    >"$tmp/export.out" 2>&1 || { bad "$name: export failed"; cat "$tmp/export.out"; return; }
  "$probe" "${flags[@]}" --checkpoint "$tmp/ck" --first 0 --count 3 \
    >"$tmp/probe.out" || { bad "$name: predict_probe failed"; return; }
  serve "$tmp/m" || { bad "$name: serve did not start"; return; }
  local model
  model=$(sed -nE 's|^serving ([^ ]+) version.*|\1|p' "$tmp/serve.out")
  local answer expected
  answer=$(head -1 "$tmp/probe.out" | curl -s -d @- "http://127.0.0.1:$port/v1/models/$model:predict")
  expected=$(tail -1 "$tmp/probe.out")
  local got
  got=$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])["predictions"]))' "$answer" 2>/dev/null) \
    || { bad "$name: not a predictions answer: ${answer:0:300}"; return; }
  if why=$(close "$got" "$expected" 1e-6); then
    ok "$name: served $got, evaluator $expected ($why)"
  else
    bad "$name: served $got, evaluator $expected ($why)"
  fi
  local status
  status=$(curl -s "http://127.0.0.1:$port/v1/models/$model")
  grep -q '"AVAILABLE"' <<<"$status" && ok "$name: model status AVAILABLE" \
    || bad "$name: model status: $status"
  kill -TERM "$serve_pid"
  wait "$serve_pid"
  local rc=$?
  [[ $rc == 0 ]] && ok "$name: SIGTERM stops it with 0" || bad "$name: exit $rc on SIGTERM"
}

case $case in
mnist)
  end_to_end mnist "$src/configs/fashion_mnist.json" --train-limit 2000 --test-limit 100
  ;;
a9a)
  end_to_end a9a "$src/configs/a9a.json" --data-dir "$src/data/a9a"
  ;;
movielens)
  if [[ -f $src/data/movielens/movielens.csv ]]; then
    dir=$src/data/movielens
  else
    bash "$src/scripts/export_movielens.sh" "$tmp/movielens" >&2 || { bad "movielens export failed"; exit 1; }
    dir=$tmp/movielens
  fi
  end_to_end movielens "$src/configs/movielens.json" --data-dir "$dir" --train-limit 20000 --test-limit 200
  ;;
reload)
  [[ -x $load ]] || { echo "no load generator (actorps-serve-load)"; exit 77; }
  a9a=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a")
  "$bin" train "${a9a[@]}" --epochs 2 --checkpoint-dir "$tmp/ck" --checkpoint-every 200 \
    --quiet --no-progress >"$tmp/train.out" 2>&1 || { bad "train failed"; cat "$tmp/train.out"; exit 1; }
  mapfile -t cks < <(ls -d "$tmp"/ck/ckpt-* | sort)
  ((${#cks[@]} >= 3)) || { bad "fewer than 3 checkpoints: ${cks[*]}"; exit 1; }
  "$bin" export "${a9a[@]}" --checkpoint "${cks[0]}" --out "$tmp/m" >/dev/null || bad "export 1 failed"
  v1=$(ls "$tmp/m")
  serve "$tmp/m" --poll-ms 100 || { bad "serve did not start"; exit 1; }
  "$probe" "${a9a[@]}" --checkpoint "${cks[0]}" --first 0 --count 8 | head -1 >"$tmp/body.json"
  "$load" --port "$port" --model a9a --body "$tmp/body.json" --connections 4 \
    --seconds 4 --watch-versions >"$tmp/load.out" 2>&1 &
  load_pid=$!
  pids+=("$load_pid")
  sleep 1 # (not an assertion: lets the load run on the first version)
  # A corrupt version first: made whole elsewhere, a byte of its ONNX file
  # flipped, then renamed into place as an export would.
  "$bin" export "${a9a[@]}" --checkpoint "${cks[1]}" --out "$tmp/other" >/dev/null || bad "export 2 failed"
  v2=$(ls "$tmp/other")
  python3 - "$tmp/other/$v2/model.onnx" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0xff
open(p, 'wb').write(b)
EOF
  mv "$tmp/other/$v2" "$tmp/m/$v2"
  while ! grep -q "version $v2 refused" "$tmp/serve.err"; do
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  line=$(grep "version $v2 refused" "$tmp/serve.err")
  [[ $line == *model.onnx* && $line == *"version $v1 keeps serving"* ]] \
    && ok "corrupt version refused: $line" || bad "no refusal naming model.onnx: $line"
  "$bin" export "${a9a[@]}" --checkpoint "${cks[2]}" --out "$tmp/m" >/dev/null || bad "export 3 failed"
  v3=$(ls "$tmp/m" | sort -n | tail -1)
  wait "$load_pid"
  rc=$?
  cat "$tmp/load.out"
  [[ $rc == 0 ]] && ok "0 failed requests under reload" || bad "load generator exit $rc"
  seen=$(sed -nE 's/.*versions seen ([0-9,]+).*/\1/p' "$tmp/load.out")
  until [[ $(curl -s "http://127.0.0.1:$port/healthz") == *"\"$v3\""* ]]; do
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ ,$seen, == *",$v1,"* && ,$seen, != *",$v2,"* && $(curl -s "http://127.0.0.1:$port/healthz") == *"\"$v3\""* ]] \
    && ok "versions seen $seen (the corrupt $v2 never), $v3 serving at the end" \
    || bad "versions seen $seen; v1 $v1 v2 $v2 v3 $v3; $(curl -s "http://127.0.0.1:$port/healthz")"
  m=$(curl -s "http://127.0.0.1:$port/metrics")
  grep -q '^actorps_serve_version_loads_total{result="refused"} 1$' <<<"$m" \
    && ok "metrics: one version refused" || bad "metrics: $(grep loads <<<"$m")"
  ;;
bad_input)
  "$bin" serve >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q "MODEL_DIR" "$tmp/e" && ok "no MODEL_DIR: exit 2" || bad "no MODEL_DIR: $rc $(cat "$tmp/e")"
  "$bin" serve "$tmp" --batch-wait-us x >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q -- "--batch-wait-us" "$tmp/e" && ok "bad flag value: exit 2: $(cat "$tmp/e")" || bad "bad flag value: $rc $(cat "$tmp/e")"
  "$bin" serve "$tmp" --bogus 1 >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q -- "unknown flag" "$tmp/e" && ok "unknown flag: exit 2" || bad "unknown flag: $rc $(cat "$tmp/e")"
  mkdir -p "$tmp/empty"
  "$bin" serve "$tmp/empty" >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q "no version to serve" "$tmp/e" && ok "no version: exit 2: $(cat "$tmp/e")" || bad "no version: $rc $(cat "$tmp/e")"
  a9a=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a")
  "$bin" train "${a9a[@]}" --epochs 1 --checkpoint-dir "$tmp/ck" --quiet --no-progress >/dev/null 2>&1 || bad "train failed"
  "$bin" export "${a9a[@]}" --checkpoint "$tmp/ck" --out "$tmp/m" >/dev/null || bad "export failed"
  serve "$tmp/m" --max-body-bytes 4096 --max-instances 4 || { bad "serve did not start"; exit 1; }
  "$bin" serve "$tmp/m" --port "$port" >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q "cannot listen" "$tmp/e" && ok "a taken port: exit 2" || bad "a taken port: $rc $(cat "$tmp/e")"
  url="http://127.0.0.1:$port/v1/models/a9a:predict"
  expect() { # STATUS TEXT BODY
    local out code
    out=$(curl -s -w '\n%{http_code}' --data-binary "$3" "$url")
    code=${out##*$'\n'}
    out=${out%$'\n'*}
    [[ $code == "$1" && $out == *"$2"* ]] && ok "$1: $out" || bad "expected $1 with '$2', got $code: $out"
  }
  expect 400 "malformed JSON" '{"instances": [{"features": [1,'
  expect 400 'key 123 is outside its vocabulary [0, 123)' '{"instances": [{"features": [3, 123]}]}'
  expect 400 'value \"x\" is not a finite float' '{"instances": [{"features": {"3": "x"}}]}'
  expect 400 'unknown input' '{"instances": [{"featurez": [3]}]}'
  expect 413 "5 instances; at most 4" '{"instances": [{}, {}, {}, {}, {}]}'
  expect 413 "larger than 4096 bytes" "$(head -c 5000 /dev/zero | tr '\0' ' ')"
  out=$(curl -s -w ' %{http_code}' -d '{"instances": [{}]}' "http://127.0.0.1:$port/v1/models/b9b:predict")
  [[ $out == *"not served here"*" 404" ]] && ok "unknown model: $out" || bad "unknown model: $out"
  kill -0 "$serve_pid" && ok "still serving after the bad requests" || bad "the server died"
  ;;
tls)
  "$bin" certs --ps 1 --workers 1 --out "$tmp/certs" >/dev/null || { bad "certs failed"; exit 1; }
  a9a=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a")
  "$bin" train "${a9a[@]}" --epochs 1 --checkpoint-dir "$tmp/ck" --quiet --no-progress >/dev/null 2>&1 || bad "train failed"
  "$bin" export "${a9a[@]}" --checkpoint "$tmp/ck" --out "$tmp/m" >/dev/null || bad "export failed"
  serve "$tmp/m" --tls-dir "$tmp/certs" || { bad "serve did not start"; exit 1; }
  grep -q "^serving a9a version .* on https://" "$tmp/serve.out" && ok "HTTPS: $(cat "$tmp/serve.out")" || bad "not https: $(cat "$tmp/serve.out")"
  out=$(curl -s --cacert "$tmp/certs/ca.pem" --resolve "coordinator:$port:127.0.0.1" \
    "https://coordinator:$port/healthz")
  [[ $out == *'"status":"ok"'* ]] && ok "curl with the CA: $out" || bad "curl with the CA: $out"
  curl -s "http://127.0.0.1:$port/healthz" >/dev/null && bad "plain HTTP answered" || ok "plain HTTP refused"
  kill -TERM "$serve_pid"; wait "$serve_pid"
  serve "$tmp/m" --tls-dir "$tmp/certs" --tls-mutual || { bad "serve --tls-mutual did not start"; exit 1; }
  curl -s --cacert "$tmp/certs/ca.pem" --resolve "coordinator:$port:127.0.0.1" \
    "https://coordinator:$port/healthz" >/dev/null && bad "mutual: a client without a certificate was answered" \
    || ok "mutual: a client without a certificate is refused"
  out=$(curl -s --cacert "$tmp/certs/ca.pem" --cert "$tmp/certs/worker0.pem" --key "$tmp/certs/worker0.key" \
    --resolve "coordinator:$port:127.0.0.1" "https://coordinator:$port/healthz")
  [[ $out == *'"status":"ok"'* ]] && ok "mutual: a client with the cluster's certificate: $out" || bad "mutual with a certificate: $out"
  "$bin" serve "$tmp/m" --tls-dir "$tmp/nothing" >/dev/null 2>"$tmp/e"; rc=$?
  [[ $rc == 2 ]] && grep -q "cannot serve HTTPS" "$tmp/e" && ok "missing certificates: exit 2" || bad "missing certificates: $rc $(cat "$tmp/e")"
  ;;
*)
  echo "unknown case $case"
  exit 2
  ;;
esac
exit $failed
