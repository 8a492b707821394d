#!/usr/bin/env bash
# Mutual TLS between real `actorps node` processes on 127.0.0.1:
# certificates made by `actorps certs`, and every refusal with a clear error
# on both sides while the cluster keeps running.
# usage: tls_test.sh ACTORPS_BINARY SOURCE_DIR CASE
# CASE: certs | refusals
set -u
bin=$1
src=$2
case_name=$3
source "$(dirname "$0")/node_lib.sh" "tls.$case_name"

sed -e 's/"connect_timeout_ms": [0-9]*/"connect_timeout_ms": 60000/' \
  "$src/configs/fashion_mnist.json" >"$tmp/job.json"
job=(--config "$tmp/job.json" --train-limit 3200 --test-limit 500 --epochs 1
     --no-progress)

# write_spec FILE (1 chief, 1 worker, 1 ps on free ports), port_of FILE
# ROLE INDEX; free_port and start_node are test/node_lib.sh's.
write_spec() {
  printf '{"cluster": {"chief": ["127.0.0.1:%s"], "worker": ["127.0.0.1:%s"], "ps": ["127.0.0.1:%s"]}}\n' \
    "$(free_port)" "$(free_port)" "$(free_port)" >"$1"
}
port_of() {
  grep -o "\"$2\": \[[^]]*\]" "$1" | grep -o '127.0.0.1:[0-9]*' \
    | sed -n "$(($3 + 1))p" | cut -d: -f2
}

# expect_refused NAME LOG PATTERN NODE_LOG NODE_PATTERN ARGS...: `actorps
# node ARGS` exits with status 1 within 30 s saying PATTERN, and NODE_LOG
# (the refusing node's) gets a line matching NODE_PATTERN.
expect_refused() {
  local name=$1 log=$2 pattern=$3 node_log=$4 node_pattern=$5
  shift 5
  timeout 30 "$bin" node "$@" >"$tmp/$log" 2>&1
  local rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q -- "$pattern" "$tmp/$log"; then
    bad "$name: exit $rc, expected 1 and '$pattern': $(tail -3 "$tmp/$log")"
  elif ! wait_for_line "$tmp/$node_log" "$node_pattern" 5; then
    bad "$name: $node_log does not say '$node_pattern': $(tail -3 "$tmp/$node_log")"
  else
    ok "$name: $(grep -o -- "$pattern.*" "$tmp/$log" | head -1 | cut -c1-150) / $(grep -o -- "$node_pattern.*" "$tmp/$node_log" | tail -1 | cut -c1-150)"
  fi
}

# expired_cert DIR NAME OU: DIR/NAME-expired.pem/.key, subject OU=OU,
# CN=NAME, signed by DIR's CA, valid for one day in 2020.
expired_cert() {
  local d=$1 name=$2 ou=$3 ca=$tmp/expired-ca
  mkdir -p "$ca/new"
  : >"$ca/index.txt"
  echo 1000 >"$ca/serial"
  cat >"$ca/ca.cnf" <<EOF
[ca]
default_ca = test
[test]
database = $ca/index.txt
new_certs_dir = $ca/new
serial = $ca/serial
default_md = sha256
policy = any
unique_subject = no
[any]
organizationName = optional
organizationalUnitName = optional
commonName = supplied
EOF
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/$name-expired.key" 2>/dev/null
  openssl req -new -key "$d/$name-expired.key" -subj "/O=actorps/OU=$ou/CN=$name" \
    -out "$ca/req.csr" 2>/dev/null
  openssl ca -batch -config "$ca/ca.cnf" -cert "$d/ca.pem" -keyfile "$d/ca.key" \
    -startdate 20200101000000Z -enddate 20200102000000Z -notext \
    -in "$ca/req.csr" -out "$d/$name-expired.pem" >/dev/null 2>&1
}

case_certs() {
  write_spec "$tmp/spec.json"
  local d=$tmp/certs
  if "$bin" certs --cluster "$tmp/spec.json" --out "$d" >"$tmp/certs.log" 2>&1 \
     && [[ -f $d/ca.pem && -f $d/coordinator.pem && -f $d/ps0.key && -f $d/worker0.pem ]]; then
    ok "actorps certs: $(head -1 "$tmp/certs.log")"
  else
    bad "actorps certs: $(cat "$tmp/certs.log")"
    return
  fi
  # Round trip with OpenSSL's own tools: each verifies against the CA, names
  # its node, and its key is the certificate's.
  local n subject
  for n in coordinator:chief ps0:ps worker0:worker; do
    subject=$(openssl x509 -in "$d/${n%%:*}.pem" -noout -subject -nameopt compat)
    if openssl verify -CAfile "$d/ca.pem" "$d/${n%%:*}.pem" >/dev/null 2>&1 \
       && [[ $subject == *"OU=${n##*:}/CN=${n%%:*}"* ]] \
       && [[ $(openssl x509 -in "$d/${n%%:*}.pem" -noout -pubkey) == \
             "$(openssl pkey -in "$d/${n%%:*}.key" -pubout)" ]]; then
      ok "${n%%:*}: verifies against the CA, $subject, key matches"
    else
      bad "${n%%:*}: $subject $(openssl verify -CAfile "$d/ca.pem" "$d/${n%%:*}.pem" 2>&1)"
    fi
  done
  [[ $(stat -c %a "$d/ps0.key") == 600 ]] && ok "keys are private (0600)" \
    || bad "ps0.key has mode $(stat -c %a "$d/ps0.key")"
  "$bin" certs --cluster "$tmp/spec.json" --out "$d" >"$tmp/again.log" 2>&1
  [[ $? -eq 2 ]] && grep -q 'ca.pem exists' "$tmp/again.log" \
    && ok "a folder with a CA is not overwritten" || bad "certs again: $(cat "$tmp/again.log")"
  # Bad input names the file; no TLS settings at all is an error.
  local args=("${job[@]}" --cluster "$tmp/spec.json" --role ps --index 0)
  timeout 10 "$bin" node "${args[@]}" --tls-ca "$d/ca.pem" --tls-cert "$d/nope.pem" \
    --tls-key "$d/ps0.key" >"$tmp/e1.log" 2>&1
  [[ $? -eq 2 ]] && grep -q "certificate $d/nope.pem: cannot read" "$tmp/e1.log" \
    && ok "a missing certificate: $(tail -1 "$tmp/e1.log")" || bad "missing cert: $(cat "$tmp/e1.log")"
  timeout 10 "$bin" node "${args[@]}" --tls-ca "$d/ca.pem" --tls-cert "$d/ps0.pem" \
    --tls-key "$d/worker0.key" >"$tmp/e2.log" 2>&1
  [[ $? -eq 2 ]] && grep -q "key $d/worker0.key does not match the certificate $d/ps0.pem" "$tmp/e2.log" \
    && ok "a key that does not match: $(tail -1 "$tmp/e2.log")" || bad "key mismatch: $(cat "$tmp/e2.log")"
  timeout 10 "$bin" node "${args[@]}" >"$tmp/e3.log" 2>&1
  [[ $? -eq 2 ]] && grep -q "no TLS settings" "$tmp/e3.log" \
    && ok "no TLS settings: $(tail -1 "$tmp/e3.log" | cut -c1-120)" || bad "no TLS: $(cat "$tmp/e3.log")"
  # tls off: the node's first line says so.
  start_node off "${args[@]}" --tls off
  if wait_for_line "$tmp/off.log" "listening" 10 \
     && head -1 "$tmp/off.log" | grep -q 'TLS is off (tls: off): plain TCP'; then
    ok "tls off, first line: $(head -1 "$tmp/off.log")"
  else
    bad "tls off: $(head -3 "$tmp/off.log")"
  fi
}

case_refusals() {
  local d=$tmp/certs other=$tmp/other
  write_spec "$tmp/spec.json"
  "$bin" certs --cluster "$tmp/spec.json" --out "$d" >/dev/null
  "$bin" certs --cluster "$tmp/spec.json" --out "$other" >/dev/null
  expired_cert "$d" coordinator chief
  [[ -s $d/coordinator-expired.pem ]] || { bad "openssl ca made no expired certificate"; return; }
  local spec=(--cluster "$tmp/spec.json")
  start_node ps0 "${job[@]}" "${spec[@]}" --role ps --index 0 --tls "$d"
  start_node worker0 "${job[@]}" "${spec[@]}" --role worker --index 0 --tls "$d"
  if ! wait_for_line "$tmp/worker0.log" "listening" 30; then
    bad "the cluster did not start: $(tail -3 "$tmp/ps0.log") $(tail -3 "$tmp/worker0.log")"
    return
  fi
  head -1 "$tmp/ps0.log" | grep -q 'TLS on: certificate' \
    && ok "first line: $(head -1 "$tmp/ps0.log" | cut -c1-150)" || bad "ps0 first line: $(head -1 "$tmp/ps0.log")"
  local port
  port=$(port_of "$tmp/spec.json" ps 0)
  # `openssl s_client` sees the node's certificate; without one of its own
  # it is refused.
  timeout 10 openssl s_client -connect "127.0.0.1:$port" -CAfile "$d/ca.pem" \
    </dev/null >"$tmp/s_client.log" 2>&1
  if grep -q 'subject=O = actorps, OU = ps, CN = ps0' "$tmp/s_client.log" \
     && grep -q 'Verify return code: 0 (ok)' "$tmp/s_client.log"; then
    ok "s_client sees ps0's certificate, verified by the CA"
  else
    bad "s_client: $(grep -E 'subject|Verify|error' "$tmp/s_client.log" | head -5)"
  fi
  wait_for_line "$tmp/ps0.log" "TLS handshake failed: .*peer did not return a certificate" 5 \
    && ok "no certificate: ps0 says $(grep -o 'TLS handshake failed.*' "$tmp/ps0.log" | tail -1)" \
    || bad "no certificate: ps0 says $(tail -2 "$tmp/ps0.log")"
  # Each rogue coordinator is refused; ps0 says why each time.
  expect_refused "plain TCP (tls off)" plain.log "requires TLS" \
    ps0.log "a plain-TCP actorps peer" \
    "${job[@]}" "${spec[@]}" --role coordinator --tls off
  head -1 "$tmp/plain.log" | grep -q 'TLS is off' \
    && ok "the plain node's first line: $(head -1 "$tmp/plain.log" | cut -c1-100)" \
    || bad "plain node's first line: $(head -1 "$tmp/plain.log")"
  expect_refused "certificate of another CA" other.log \
    "refused this node's certificate: tlsv1 alert unknown ca" \
    ps0.log "TLS handshake failed: certificate verify failed" \
    "${job[@]}" "${spec[@]}" --role coordinator --tls-ca "$d/ca.pem" \
    --tls-cert "$other/coordinator.pem" --tls-key "$other/coordinator.key"
  expect_refused "expired certificate" expired.log \
    "refused this node's certificate: sslv3 alert certificate expired" \
    ps0.log "certificate has expired" \
    "${job[@]}" "${spec[@]}" --role coordinator --tls-ca "$d/ca.pem" \
    --tls-cert "$d/coordinator-expired.pem" --tls-key "$d/coordinator-expired.key"
  expect_refused "a worker's certificate joining as the coordinator" role.log \
    "refused this chief: the certificate of its connection names worker0, its handshake says coordinator" \
    ps0.log "refused chief 0: the certificate of its connection names worker0" \
    "${job[@]}" "${spec[@]}" --role coordinator --tls-ca "$d/ca.pem" \
    --tls-cert "$d/worker0.pem" --tls-key "$d/worker0.key"
  # A worker's certificate serving as ps0 (another cluster of the same CA,
  # on new ports): the worker that dials it refuses it, and it hears why.
  write_spec "$tmp/spec2.json"
  start_node fake_ps0 "${job[@]}" --cluster "$tmp/spec2.json" --role ps --index 0 \
    --tls-ca "$d/ca.pem" --tls-cert "$d/worker0.pem" --tls-key "$d/worker0.key"
  wait_for_line "$tmp/fake_ps0.log" "listening" 10
  expect_refused "a worker's certificate serving as ps0" fake.log \
    "ps0 at 127.0.0.1:[0-9]*: its certificate names worker0 .*, not ps0" \
    fake_ps0.log "closed a connection from .* (worker0)" \
    "${job[@]}" --cluster "$tmp/spec2.json" --role worker --index 0 --tls "$d"
  grep -q 'this node is ps0, but its certificate .*worker0.pem names worker0' "$tmp/fake_ps0.log" \
    && ok "the fake ps0 was warned at its start" || bad "fake ps0: $(head -3 "$tmp/fake_ps0.log")"
  # The cluster keeps running: the real coordinator runs the job on it.
  local p
  for p in ps0 worker0; do
    kill -0 "$(cat "$tmp/$p.pid")" 2>/dev/null && ok "$p still runs after the refusals" \
      || bad "$p died: $(tail -3 "$tmp/$p.log")"
  done
  timeout 120 "$bin" node "${job[@]}" "${spec[@]}" --role coordinator --tls "$d" \
    >"$tmp/chief.log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] && grep -q '^done: test_loss' "$tmp/chief.log" \
    && ok "then the coordinator with its own certificate runs the job: $(grep '^done' "$tmp/chief.log" | cut -c1-80)" \
    || bad "the real coordinator: exit $rc, $(tail -5 "$tmp/chief.log")"
  # Under TLS too, a worker and a ps of one host settle on shared memory
  # (inside the TLS session, after both were authenticated).
  grep -q 'worker 0 -> ps 0: frames through shared memory$' "$tmp/worker0.log" \
    && ok "TLS: worker0's data channel to ps0 moves its frames through shared memory" \
    || bad "TLS: worker0's data channel: $(grep -- '-> ps 0' "$tmp/worker0.log" | head -2)"
}

case "$case_name" in
  certs) case_certs ;;
  refusals) case_refusals ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
