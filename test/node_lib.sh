# Shared by the shell tests that start `actorps node` processes on
# 127.0.0.1 (test/tls_test.sh, test/authz_test.sh): a scratch folder and the
# processes started, both cleaned up at exit (the nodes' logs kept under
# $ACTORPS_TEST_LOGS/LABEL.PID when that is set), ok/bad counters, free
# ports, nodes in the background, and waiting for a log line.
# usage: bin=ACTORPS_BINARY; source node_lib.sh LABEL
# shellcheck shell=bash

node_lib_label=$1
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  if [[ -n ${ACTORPS_TEST_LOGS:-} ]]; then
    mkdir -p "$ACTORPS_TEST_LOGS/$node_lib_label.$$"
    cp "$tmp"/*.log "$ACTORPS_TEST_LOGS/$node_lib_label.$$/" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

# free_port: a TCP port of 127.0.0.1 below the ephemeral range that nothing
# listens on and that this script has not handed out before.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[[ ${ephemeral_low:-0} -gt 12000 ]] || ephemeral_low=32768
used_ports=" "
free_port() {
  local p
  while :; do
    p=$((10000 + RANDOM % (ephemeral_low - 10000)))
    [[ $used_ports == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      echo "$p"
      return
    fi
  done
}

# start_node NAME ARGS...: `actorps node ARGS` in the background, output in
# $tmp/NAME.log, its pid in $tmp/NAME.pid.
start_node() {
  local name=$1
  shift
  "$bin" node "$@" >"$tmp/$name.log" 2>&1 &
  echo $! >"$tmp/$name.pid"
  pids+=($!)
}

# wait_for_line FILE PATTERN SECONDS: whether a line matching PATTERN shows
# up in FILE within SECONDS.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
