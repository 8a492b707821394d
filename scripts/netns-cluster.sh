#!/usr/bin/env bash
# Runs an actorps cluster as if on separate hosts: every node (coordinator,
# each ps, each worker) in a Linux network namespace of its own with its own
# IP address, joined to the others by a veth pair to a Linux bridge, its link
# shaped by tc (tbf) to a bandwidth, optionally with latency and loss (netem,
# where the kernel has it), and optionally cut off for a while (a partition).
#
# usage: scripts/netns-cluster.sh [options] -- ACTORPS_BINARY [job flags...]
#
#   --workers N        workers (2)
#   --ps N             parameter servers (2)
#   --link RATE        bandwidth of every node's link, each direction, in tc's
#                      rate syntax: 1gbit, 100mbit, 500kbit, 10gbit, 125mbps
#                      (bytes/s), 1.5gbit, a bare number is bit/s
#                      (default 1gbit; "none": no shaping)
#   --latency MS       one-way delay added to every packet a node sends (the
#                      round trip between two nodes is 2 x MS); needs the
#                      kernel's netem qdisc: without it the script says so
#                      and exits 2 instead of running without the delay
#   --loss PCT         share of the packets a node sends that are dropped
#                      (netem, as --latency)
#   --partition ROLE:I@START:DURATION
#                      take node ROLE I's link down (`ip link set DEV down`
#                      on the host side of its veth) START seconds after
#                      every node joined (the coordinator's "every node
#                      joined" line) for DURATION seconds, then up again;
#                      ROLE worker | ps | coordinator; repeatable.
#                      e.g. worker:1@5:3
#   --tls off|DIR      mutual TLS (default: throw-away certificates made with
#                      `actorps certs` in the temporary folder); DIR: yours;
#                      off: plain TCP (also taken among the job flags)
#   --subnet A.B.C     the nodes' /24 (default 10.77.0): the coordinator is
#                      A.B.C.10, ps i A.B.C.(11+i), worker i after the ps.
#                      Must be private (10/8, 172.16/12, 192.168/16).
#   --port P           the port every node listens on, at its own address
#                      (default 7700)
#   --prefix NAME      names of what the script creates start with NAME and
#                      its process id (default aps; 1-5 lower-case letters
#                      and digits, starting with a letter)
#   --timeout S        stop everything and exit 124 after S seconds (600)
#   --grace S          after the coordinator exits, how long the other nodes
#                      may take to exit before they are killed (10)
#   -h, --help         this text
#
# What it creates, with ID = PREFIX + the script's process id (aps12345):
# namespaces ID-coordinator, ID-ps0, ..., ID-worker0, ...; a bridge IDbr
# with no address on the host (the nodes reach each other and nothing
# else); per node a veth pair, IDhK on the host side in the bridge and eth0
# inside the node's namespace, each end shaped with tbf to RATE (so RATE
# in each direction); a temporary folder with the cluster spec
# (TF_CONFIG shape, cluster.json), the certificates and each node's log.
#
# It starts every node as
#   ip netns exec ID-NODE ACTORPS_BINARY node --role R --index I \
#     --cluster DIR/cluster.json --tls ... [job flags]
# (ps first, then workers, then the coordinator), prefixes each node's output
# lines with its name ([coordinator], [ps0], [worker1]; its own lines with
# [netns]), waits for the coordinator, gives the other nodes --grace seconds
# to exit, and exits with the coordinator's status (124 on --timeout, 2 on
# bad input, 1 when the network cannot be set up, 128+N on signal N).
#
# Cleanup: everything above is removed when the script exits, fails, or gets
# INT, TERM, HUP or PIPE (processes in the namespaces killed, namespaces,
# veths and the bridge deleted, the folder removed); each node process gets
# SIGKILL from the kernel when the script dies (setpriv --pdeathsig). What a
# SIGKILLed script leaves behind (namespaces, veths, a bridge, a temporary
# folder named with the same prefix and the id of a process that no longer
# runs) is removed by the next run, with a line naming each thing; it is
# never reused. Things of another run that is still going (its process id
# runs this script) are left alone.
#
# Needs root, iproute2 (ip, tc) and util-linux (setpriv).
#
# Example: 2 ps + 2 workers on 1 Gbit/s links, worker 1 cut off for 3 s:
#   scripts/netns-cluster.sh --link 1gbit --partition worker:1@5:3 -- \
#     build/actorps --config configs/fashion_mnist.json --epochs 3
set -uo pipefail

me=netns-cluster.sh
usage() { sed -n '/^# usage:/,/^#   -h, --help/{s/^# \{0,1\}//;p}' "$0"; }
die_usage() {
  echo "$me: $*" >&2
  echo "(scripts/netns-cluster.sh --help for the options)" >&2
  exit 2
}
die() {
  echo "$me: $*" >&2
  exit 1
}
say() { echo "[netns] $*"; }

# -- options -------------------------------------------------------------------

workers=2
ps=2
link=1gbit
latency=""
loss=""
partitions=()
tls=""
subnet=10.77.0
port=7700
prefix=aps
timeout_s=600
grace_s=10

need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --workers) need_value "$@"; workers=$2; shift 2 ;;
    --ps) need_value "$@"; ps=$2; shift 2 ;;
    --link) need_value "$@"; link=$2; shift 2 ;;
    --latency) need_value "$@"; latency=$2; shift 2 ;;
    --loss) need_value "$@"; loss=$2; shift 2 ;;
    --partition) need_value "$@"; partitions+=("$2"); shift 2 ;;
    --tls) need_value "$@"; tls=$2; shift 2 ;;
    --subnet) need_value "$@"; subnet=$2; shift 2 ;;
    --port) need_value "$@"; port=$2; shift 2 ;;
    --prefix) need_value "$@"; prefix=$2; shift 2 ;;
    --timeout) need_value "$@"; timeout_s=$2; shift 2 ;;
    --grace) need_value "$@"; grace_s=$2; shift 2 ;;
    --) shift; break ;;
    *) die_usage "unknown option '$1' (the actorps binary and job flags come after --)" ;;
  esac
done
[[ $# -ge 1 ]] || die_usage "no actorps binary: give it after --"
bin=$1
shift
job_flags=("$@")
[[ -x $bin && -f $bin ]] || die_usage "'$bin' is not an executable file"
[[ $bin == */* ]] || bin=./$bin
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

rest=()
for ((i = 0; i < ${#job_flags[@]}; i++)); do
  f=${job_flags[i]}
  case $f in
    --role | --role=* | --index | --index=* | --cluster | --cluster=* \
      | --cluster-resolver | --cluster-resolver=*)
      die_usage "job flag $f: the script gives every node its role, index and cluster spec" ;;
    --workers | --workers=* | --ps | --ps=*)
      die_usage "job flag $f: give it to $me (before --), which writes the cluster spec" ;;
    --tls)
      # Among the job flags, --tls off|DIR means what the script's own does.
      ((i + 1 < ${#job_flags[@]})) || die_usage "job flag --tls needs a value: off or a folder"
      [[ -z $tls || $tls == "${job_flags[i + 1]}" ]] \
        || die_usage "--tls $tls and the job flag --tls ${job_flags[i + 1]} disagree"
      tls=${job_flags[i + 1]}
      i=$((i + 1))
      continue ;;
    --tls=* | --tls-ca* | --tls-cert* | --tls-key*)
      die_usage "job flag $f: every node would get the same files; give --tls off|DIR (a folder made by actorps certs)" ;;
  esac
  rest+=("$f")
done
job_flags=("${rest[@]}")

is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= $2 && 10#$1 <= $3)); }
is_count "$workers" 1 64 || die_usage "--workers '$workers': a number from 1 to 64"
is_count "$ps" 1 32 || die_usage "--ps '$ps': a number from 1 to 32"
workers=$((10#$workers))
ps=$((10#$ps))
is_count "$port" 1 65535 || die_usage "--port '$port': a port number (1-65535)"
is_count "$timeout_s" 1 86400 || die_usage "--timeout '$timeout_s': seconds, 1 to 86400"
is_count "$grace_s" 0 3600 || die_usage "--grace '$grace_s': seconds, 0 to 3600"
[[ $prefix =~ ^[a-z][a-z0-9]{0,4}$ ]] \
  || die_usage "--prefix '$prefix': 1-5 lower-case letters and digits, starting with a letter (interface names have at most 15 characters)"

# A rate in tc's syntax (tc(8), "RATES"): a decimal number, then bit or bps
# (bytes/s) with an optional k, m, g, t (powers of 1000) or ki, mi, gi, ti
# (powers of 1024) before it; a bare number is bit/s. Prints bit/s.
rate_bits() {
  local s=${1,,} num unit mult=1 scale
  [[ $s =~ ^([0-9]+(\.[0-9]*)?|\.[0-9]+)(([kmgt]i?)?(bit|bps))?$ ]] || return 1
  num=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[3]:-bit}
  case $unit in
    *bps) mult=8 ;;
  esac
  scale=${unit%bit}
  scale=${scale%bps}
  case $scale in
    "") ;;
    k) mult=$((mult * 1000)) ;;
    m) mult=$((mult * 1000000)) ;;
    g) mult=$((mult * 1000000000)) ;;
    t) mult=$((mult * 1000000000000)) ;;
    ki) mult=$((mult * 1024)) ;;
    mi) mult=$((mult * 1048576)) ;;
    gi) mult=$((mult * 1073741824)) ;;
    ti) mult=$((mult * 1099511627776)) ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}
shape=1
if [[ ${link,,} == none ]]; then
  shape=0
else
  link_bits=$(rate_bits "$link") \
    || die_usage "--link '$link' is not a rate: give a number and a tc unit, e.g. 1gbit, 100mbit, 500kbit, 2.5gbit, 125mbps (bytes/s), or none"
  # Below 8 kbit/s a single full-size packet takes more than a second; above
  # 100 Gbit/s tc's 32-bit rate tables overflow in older kernels.
  awk -v b="$link_bits" 'BEGIN { exit !(b >= 8000 && b <= 100e9) }' \
    || die_usage "--link '$link' is $link_bits bit/s: give 8kbit to 100gbit"
fi
if [[ -n $latency ]]; then
  if ! [[ $latency =~ ^[0-9]+(\.[0-9]+)?$ ]] \
     || ! awk -v l="$latency" 'BEGIN { exit !(l > 0 && l <= 10000) }'; then
    die_usage "--latency '$latency': milliseconds, more than 0 and at most 10000"
  fi
fi
if [[ -n $loss ]]; then
  if ! [[ $loss =~ ^[0-9]+(\.[0-9]+)?%?$ ]] \
     || ! awk -v l="${loss%\%}" 'BEGIN { exit !(l > 0 && l < 100) }'; then
    die_usage "--loss '$loss': a percentage, more than 0 and less than 100"
  fi
  loss=${loss%\%}
fi
if [[ -n $tls && $tls != off ]]; then
  [[ -d $tls && -f $tls/ca.pem ]] || die_usage "--tls '$tls': neither off nor a folder with ca.pem (made by actorps certs)"
  tls=$(cd "$tls" && pwd)
fi
[[ $subnet =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] \
  || die_usage "--subnet '$subnet': the first three numbers of a /24, e.g. 10.77.0"
o1=$((10#${BASH_REMATCH[1]}))
o2=$((10#${BASH_REMATCH[2]}))
o3=$((10#${BASH_REMATCH[3]}))
((o1 <= 255 && o2 <= 255 && o3 <= 255)) || die_usage "--subnet '$subnet': numbers above 255"
((o1 == 10 || (o1 == 172 && o2 >= 16 && o2 <= 31) || (o1 == 192 && o2 == 168))) \
  || die_usage "--subnet '$subnet' is not private (10.x.x, 172.16-31.x, 192.168.x)"
subnet=$o1.$o2.$o3

# -- nodes and partitions ------------------------------------------------------

# Node k: names[k] (coordinator, ps0, ..., worker0, ...), roles[k] and
# indexes[k] for `actorps node`, addrs[k] A.B.C.(10+k).
names=(coordinator)
roles=(coordinator)
indexes=(0)
for ((i = 0; i < ps; i++)); do names+=("ps$i"); roles+=(ps); indexes+=("$i"); done
for ((i = 0; i < workers; i++)); do names+=("worker$i"); roles+=(worker); indexes+=("$i"); done
nodes=${#names[@]}
addrs=()
for ((k = 0; k < nodes; k++)); do addrs+=("$subnet.$((10 + k))"); done

# node_of ROLE INDEX: prints k.
node_of() {
  local k role=$1
  [[ $role == chief ]] && role=coordinator
  for ((k = 0; k < nodes; k++)); do
    if [[ ${roles[k]} == "$role" && ${indexes[k]} == "$2" ]]; then
      echo "$k"
      return 0
    fi
  done
  return 1
}

# Partitions: part_node[j], part_start[j], part_len[j] (seconds), part_state[j]
# (waiting, down, over).
part_node=()
part_start=()
part_len=()
part_state=()
for p in "${partitions[@]}"; do
  [[ $p =~ ^(worker|ps|coordinator|chief):([0-9]+)@([0-9]+(\.[0-9]+)?):([0-9]+(\.[0-9]+)?)$ ]] \
    || die_usage "--partition '$p': ROLE:INDEX@START:DURATION in seconds, e.g. worker:1@5:3"
  k=$(node_of "${BASH_REMATCH[1]}" "$((10#${BASH_REMATCH[2]}))") \
    || die_usage "--partition '$p': there is no ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} (--workers $workers, --ps $ps)"
  awk -v d="${BASH_REMATCH[5]}" 'BEGIN { exit !(d > 0) }' || die_usage "--partition '$p': a duration of 0"
  part_node+=("$k")
  part_start+=("${BASH_REMATCH[3]}")
  part_len+=("${BASH_REMATCH[5]}")
  part_state+=(waiting)
done

# -- preconditions -------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "must run as root: it creates network namespaces, veth pairs and a bridge"
for prog in ip tc setpriv; do
  command -v "$prog" >/dev/null \
    || die "$prog not found (Debian: $([[ $prog == setpriv ]] && echo util-linux || echo iproute2))"
done

id=$prefix$$
bridge=${id}br
tmp=""
pids=()        # pids[k]: node k's process (actorps, after ip netns exec)
created_ns=()  # namespaces this run created
created_links=()

# -- leftovers of killed runs --------------------------------------------------

# run_alive ID: whether process ID still runs this script (a run going on).
run_alive() {
  [[ $1 != "$$" && -r /proc/$1/cmdline ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "$me"
}

# kill_in_ns NS: SIGKILLs every process in namespace NS; prints their pids.
kill_in_ns() {
  local p left
  left=$(ip netns pids "$1" 2>/dev/null | tr '\n' ' ')
  for p in $left; do kill -KILL "$p" 2>/dev/null; done
  echo "$left"
}

remove_leftovers() {
  local ns link owner left
  while read -r ns _; do
    [[ $ns =~ ^$prefix([0-9]+)-[a-z]+[0-9]*$ ]] || continue
    owner=${BASH_REMATCH[1]}
    if run_alive "$owner"; then
      say "leaving namespace $ns alone: it belongs to $me process $owner, still running"
      continue
    fi
    left=$(kill_in_ns "$ns")
    say "removing namespace $ns, left over from a run that did not clean up (process $owner is gone)${left:+; killed the processes still in it: $left}"
    ip netns del "$ns" 2>/dev/null || say "could not remove namespace $ns: $(ip netns del "$ns" 2>&1)"
  done < <(ip netns list 2>/dev/null)
  while read -r link; do
    [[ $link =~ ^$prefix([0-9]+)(br|h[0-9]+|t[01])$ ]] || continue
    owner=${BASH_REMATCH[1]}
    if run_alive "$owner"; then
      say "leaving link $link alone: it belongs to $me process $owner, still running"
      continue
    fi
    ip link show dev "$link" >/dev/null 2>&1 || continue # its veth peer went first
    say "removing link $link, left over from a run that did not clean up (process $owner is gone)"
    ip link del dev "$link" 2>/dev/null || say "could not remove link $link: $(ip link del dev "$link" 2>&1)"
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }')
  local dir
  for dir in "${TMPDIR:-/tmp}/$me.$prefix"[0-9]*.*; do
    [[ -d $dir && ! -L $dir && -O $dir && ${dir##*/} =~ ^$me\.$prefix([0-9]+)\.[A-Za-z0-9]{6}$ ]] || continue
    owner=${BASH_REMATCH[1]}
    run_alive "$owner" && continue
    say "removing folder $dir, left over from a run that did not clean up (process $owner is gone)"
    rm -rf "$dir"
  done
}

# -- cleanup -------------------------------------------------------------------

cleaned=0
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  ((cleaned)) && return
  cleaned=1
  trap '' PIPE # a closed stdout must not stop the cleanup half-way
  local k p ns
  # The nodes first (TERM, then KILL after 2 s), then anything else in the
  # namespaces, then the namespaces (their ends of the veths go with them),
  # the host ends and the bridge, then the folder.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for ((k = 0; k < 20; k++)); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for ns in "${created_ns[@]}"; do kill_in_ns "$ns" >/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in "${created_ns[@]}"; do
    ip netns del "$ns" 2>/dev/null
  done
  for p in "${created_links[@]}"; do
    ip link show dev "$p" >/dev/null 2>&1 && ip link del dev "$p" 2>/dev/null
  done
  # Whatever else carries this run's id (a step that failed half-way).
  while read -r ns _; do
    [[ $ns == "$id"-* ]] && ip netns del "$ns" 2>/dev/null
  done < <(ip netns list 2>/dev/null)
  while read -r p; do
    [[ $p =~ ^$id(br|h[0-9]+|t[01])$ ]] && ip link del dev "$p" 2>/dev/null
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }')
  [[ -n $tmp ]] && rm -rf "$tmp"
  # Let the output filters print the nodes' last lines.
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'say "interrupted (SIGINT): stopping every node"; exit 130' INT
trap 'say "terminated (SIGTERM): stopping every node"; exit 143' TERM
trap 'say "hung up (SIGHUP): stopping every node"; exit 129' HUP
trap 'exit 141' PIPE # stdout closed (| head): clean up all the same

remove_leftovers

# -- netem ---------------------------------------------------------------------

# Latency and loss need netem. Tried on a throw-away veth pair: a kernel
# without sch_netem answers "Specified qdisc kind is unknown".
if [[ -n $latency || -n $loss ]]; then
  created_links+=("${id}t0")
  if ! out=$(ip link add "${id}t0" type veth peer name "${id}t1" 2>&1); then
    die "cannot create a veth pair to try netem on: $out"
  fi
  out=$(tc qdisc add dev "${id}t0" root netem delay 1ms 2>&1)
  netem_ok=$?
  ip link del dev "${id}t0" 2>/dev/null
  if ((netem_ok != 0)); then
    what=""
    [[ -n $latency ]] && what="latency (--latency $latency)"
    [[ -n $loss ]] && what="${what:+$what and }loss (--loss $loss)"
    echo "$me: cannot add $what: this kernel has no working netem qdisc (tc: ${out//$'\n'/ }); load it (modprobe sch_netem) or run without --latency/--loss; --link (tbf) works without it" >&2
    exit 2
  fi
fi

# -- the network ---------------------------------------------------------------

# run_ip WHAT ARGS...: runs ARGS; on failure, says what could not be done
# and exits 1 (cleanup removes what was made).
run_ip() {
  local what=$1 out
  shift
  if ! out=$("$@" 2>&1); then
    echo "$me: cannot $what: $* said: $out" >&2
    exit 1
  fi
}

# shape DEV [NS]: a tbf of $link on DEV's egress (in namespace NS), under
# netem when --latency or --loss asks for it (egress of the node's side only,
# so that a packet is delayed once between two nodes).
if ((shape)); then
  # The bucket: 4 ms at the rate, at least 64 KiB (a GSO packet of veth);
  # the queue: 50 ms at the rate.
  burst=$(awk -v b="$link_bits" 'BEGIN { x = b / 8 * 0.004; if (x < 65536) x = 65536; printf "%.0f\n", x }')
fi
shape() {
  local dev=$1 ns=${2:-} nsx=() parent=root netem=()
  [[ -n $ns ]] && nsx=(ip netns exec "$ns")
  if [[ -n $ns && ( -n $latency || -n $loss ) ]]; then
    [[ -n $latency ]] && netem+=(delay "${latency}ms")
    [[ -n $loss ]] && netem+=(loss "${loss}%")
    run_ip "add netem to $dev${ns:+ in $ns}" "${nsx[@]}" tc qdisc add dev "$dev" root handle 1: netem "${netem[@]}" limit 100000
    parent="parent 1:1"
  fi
  if ((shape)); then
    # shellcheck disable=SC2086
    run_ip "shape $dev${ns:+ in $ns} to $link" "${nsx[@]}" tc qdisc add dev "$dev" $parent handle 10: tbf rate "$link" burst "$burst" latency 50ms
  fi
}

run_ip "create the bridge $bridge" ip link add "$bridge" type bridge
created_links+=("$bridge")
run_ip "bring up $bridge" ip link set dev "$bridge" up
for ((k = 0; k < nodes; k++)); do
  ns=$id-${names[k]}
  hostdev=${id}h$k
  run_ip "create namespace $ns" ip netns add "$ns"
  created_ns+=("$ns")
  run_ip "create the veth pair $hostdev/eth0 of $ns" \
    ip link add "$hostdev" type veth peer name eth0 netns "$ns"
  created_links+=("$hostdev")
  run_ip "attach $hostdev to $bridge" ip link set dev "$hostdev" master "$bridge"
  run_ip "bring up $hostdev" ip link set dev "$hostdev" up
  run_ip "bring up lo in $ns" ip netns exec "$ns" ip link set dev lo up
  run_ip "give $ns the address ${addrs[k]}" ip netns exec "$ns" ip addr add "${addrs[k]}/24" dev eth0
  run_ip "bring up eth0 in $ns" ip netns exec "$ns" ip link set dev eth0 up
  shape "$hostdev"
  shape eth0 "$ns"
done

describe_link() {
  local what=""
  ((shape)) && what="tbf rate $link each way"
  [[ -n $latency ]] && what+="${what:+, }netem delay ${latency} ms"
  [[ -n $loss ]] && what+="${what:+, }netem loss ${loss}%"
  echo "${what:-no shaping}"
}
say "run $id: $nodes nodes on bridge $bridge, subnet $subnet.0/24, each link $(describe_link)"
for ((k = 0; k < nodes; k++)); do
  q=$(ip netns exec "$id-${names[k]}" tc qdisc show dev eth0 | awk '$2 == "tbf" || $2 == "netem" { $1 = ""; print }' | tr '\n' ';')
  say "${names[k]}: ${addrs[k]}:$port in namespace $id-${names[k]}, veth ${id}h$k;${q:- no qdisc}"
done

# -- the cluster spec, certificates --------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$me.$id.XXXXXX") || die "cannot make a temporary folder"
chmod 700 "$tmp"
spec=$tmp/cluster.json
join_addrs() {
  local role=$1 k list=""
  for ((k = 0; k < nodes; k++)); do
    [[ ${roles[k]} == "$role" ]] && list+="\"${addrs[k]}:$port\", "
  done
  echo "${list%, }"
}
printf '{"cluster": {"chief": [%s], "ps": [%s], "worker": [%s]}}\n' \
  "$(join_addrs coordinator)" "$(join_addrs ps)" "$(join_addrs worker)" >"$spec"
say "cluster spec $spec: $(cat "$spec")"

tls_flags=()
if [[ $tls == off ]]; then
  tls_flags=(--tls off)
  say "TLS off: plain TCP between the nodes"
elif [[ -n $tls ]]; then
  tls_flags=(--tls "$tls")
  say "TLS: certificates in $tls"
else
  if ! out=$("$bin" certs --cluster "$spec" --out "$tmp/certs" 2>&1); then
    echo "$me: $bin certs failed: $out" >&2
    exit 1
  fi
  tls_flags=(--tls "$tmp/certs")
  say "TLS: throw-away certificates of a new CA in $tmp/certs"
fi

# -- starting the nodes --------------------------------------------------------

# start_node K: starts node K in its namespace; its output (stdout and
# stderr) goes to this script's stdout, each line prefixed with its name,
# and to $tmp/NAME.log. ACTORPS_LAUNCHED=1: the node does not prefix its
# log lines itself (as under `actorps launch`).
start_node() {
  local k=$1 name
  name=${names[k]}
  ACTORPS_LAUNCHED=1 setpriv --pdeathsig KILL \
    ip netns exec "$id-$name" "$bin" node --role "${roles[k]}" --index "${indexes[k]}" \
    --cluster "$spec" "${tls_flags[@]}" "${job_flags[@]}" \
    > >(tee "$tmp/$name.log" | sed -u "s/^/[$name] /") 2>&1 </dev/null &
  pids[k]=$!
}
for ((k = 1; k < nodes; k++)); do start_node "$k"; done
start_node 0

# -- waiting for the coordinator -----------------------------------------------

now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f\n", a - b }'; }
later_than() { awk -v a="$(now)" -v b="$1" -v d="$2" 'BEGIN { exit !(a - b >= d) }'; }

t_start=$(now)
t_joined=""
coord=${pids[0]}
while kill -0 "$coord" 2>/dev/null; do
  if later_than "$t_start" "$timeout_s"; then
    say "timeout: the job still runs after $timeout_s s (--timeout); stopping every node"
    exit 124
  fi
  if [[ -z $t_joined ]] && grep -q 'every node joined' "$tmp/coordinator.log" 2>/dev/null; then
    t_joined=$(now)
    ((${#part_node[@]})) && say "every node joined: partitions count from now"
  fi
  if [[ -n $t_joined ]]; then
    for j in "${!part_node[@]}"; do
      k=${part_node[j]}
      dev=${id}h$k
      if [[ ${part_state[j]} == waiting ]] && later_than "$t_joined" "${part_start[j]}"; then
        run_ip "take $dev down" ip link set dev "$dev" down
        part_state[j]=down
        part_down[j]=$(now)
        say "partition: ${names[k]}'s link ($dev) down at $(elapsed "$t_joined") s for ${part_len[j]} s"
      elif [[ ${part_state[j]} == down ]] && later_than "${part_down[j]}" "${part_len[j]}"; then
        run_ip "bring $dev up again" ip link set dev "$dev" up
        part_state[j]=over
        say "partition: ${names[k]}'s link ($dev) up again after $(elapsed "${part_down[j]}") s"
      fi
    done
  fi
  sleep 0.1
done
wait "$coord"
status=$?
say "coordinator exited with status $status after $(elapsed "$t_start") s"
for j in "${!part_node[@]}"; do
  k=${part_node[j]}
  case ${part_state[j]} in
    waiting) say "partition of ${names[k]} never happened: the job ended first" ;;
    down)
      ip link set dev "${id}h$k" up 2>/dev/null
      say "partition: ${names[k]}'s link up again (the job ended during the partition)" ;;
  esac
done

# The coordinator shuts the other nodes down at the end of the job; a node
# it could not reach is killed after the grace.
t=$(now)
for ((k = 1; k < nodes; k++)); do
  p=${pids[k]}
  while kill -0 "$p" 2>/dev/null && ! later_than "$t_start" "$timeout_s" \
        && ! later_than "$t" "$grace_s"; do
    sleep 0.1
  done
  if kill -0 "$p" 2>/dev/null; then
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    say "${names[k]} still ran $grace_s s after the coordinator exited; killed"
  else
    wait "$p"
    say "${names[k]} exited with status $?"
  fi
done
exit "$status"
