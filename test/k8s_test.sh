#!/usr/bin/env bash
# The Kubernetes manifests of deploy/k8s/ as their pods would run, on this
# machine: no Kubernetes runs here, so test/tools/k8s_pods.py turns a
# manifest into its pods (host name, command, environment: TF_CONFIG as
# Kubeflow's operator writes it, or the JobSet labels the downward API
# gives), each pod's host name is mapped to its own 127.0.0.x address in
# /etc/hosts (a private mount namespace: unshare -m, the file bound over
# /etc/hosts there only), the volumes are folders here, and every pod runs
# its manifest's command as written, with a small job's flags appended.
#
# usage: k8s_test.sh ACTORPS_BINARY SOURCE_DIR CASE
#   tfjob   coordinator, 2 ps, 2 workers and an evaluator; each node exits 0
#           by itself, the evaluator scores the last epoch; the same pods
#           again resume from the newest checkpoint (--resume-if-any)
#   jobset  the same with --cluster-resolver jobset, and the refusals of an
#           incomplete pod environment (exit 2, naming the variable)
#   join    the JobSet running, then the pods of deploy/k8s/jobset-join.yaml
#           (workers 2 and 3) start, join with --join, train closures and
#           exit 0 with the job; each example once per epoch; a pod of
#           another role with --join is refused (exit 2)
# Needs root (a mount namespace); exits 77 (skipped) saying why otherwise.
set -u
bin=$1
src=$2
case=$3

if [[ -z ${ACTORPS_K8S_NS:-} ]]; then
  if [[ $EUID -ne 0 ]]; then
    echo "SKIP: needs root, for a mount namespace with its own /etc/hosts"
    exit 77
  fi
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIP: unshare -m failed here (no mount namespaces)"
    exit 77
  fi
  ACTORPS_K8S_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi

source "$src/test/node_lib.sh" "k8s-$case"

py=/usr/bin/python3
manifest=$src/deploy/k8s/$case.yaml
[[ $case == join ]] && manifest=$src/deploy/k8s/jobset.yaml
vol=$tmp/vol
mkdir -p "$vol/job" "$vol/ckpt"
cp "$src/configs/fashion_mnist.json" "$vol/job/job.json"
# Certificates for the JobSet's 2 workers and the 2 that join.
"$bin" certs --ps 2 --workers 4 --out "$vol/certs" >/dev/null 2>&1 \
  || { echo "FAILED: actorps certs"; exit 1; }
small=(--epochs 2 --train-limit 4000 --test-limit 1000)

# The pods; every host name gets its own address.
pods_of() {
  "$py" "$src/test/tools/k8s_pods.py" "$1" \
    --map /etc/actorps/job="$vol/job" --map /etc/actorps/certs="$vol/certs" \
    --map /var/lib/actorps/checkpoints="$vol/ckpt" >"$2" \
    || { echo "FAILED: $1: no pods"; exit 1; }
}
pods_of "$manifest" "$tmp/pods.jsonl"
: >"$tmp/join.jsonl"
[[ $case == join ]] && pods_of "$src/deploy/k8s/jobset-join.yaml" "$tmp/join.jsonl"
cp /etc/hosts "$tmp/hosts"
# Each case its own addresses: they may run at once (ctest -j), on the
# same port.
n=20
[[ $case == jobset ]] && n=40
[[ $case == join ]] && n=60
while read -r host; do
  echo "127.0.0.$n $host" >>"$tmp/hosts"
  n=$((n + 1))
done < <(jq -r '.host' "$tmp/pods.jsonl" "$tmp/join.jsonl")
mount --bind "$tmp/hosts" /etc/hosts || { echo "FAILED: mount --bind"; exit 1; }
echo "pods: $(jq -r '.name' "$tmp/pods.jsonl" | tr '\n' ' ')"

# run_pod LINE [FLAGS...]: pod LINE of pods.jsonl (of $pods, if set) in the
# background, its environment only (plus PATH), the manifest's command with
# FLAGS appended.
run_pod() {
  local line=$1 file=${pods:-$tmp/pods.jsonl}
  shift
  local name cmd=() envs=()
  name=$(sed -n "${line}p" "$file" | jq -r '.name')
  mapfile -t cmd < <(sed -n "${line}p" "$file" | jq -r '.command[]')
  mapfile -t envs < <(sed -n "${line}p" "$file" \
                        | jq -r '.env | to_entries[] | "\(.key)=\(.value)"')
  [[ ${cmd[0]} == actorps ]] && cmd[0]=$bin
  env -i PATH="$PATH" "${envs[@]}" "${cmd[@]}" "$@" >"$tmp/$name.log" 2>&1 &
  echo $! >"$tmp/$name.pid"
  pids+=($!)
}

# run_all ROUND FLAGS...: every pod; waits for each (see wait_pods).
run_all() {
  local round=$1
  shift
  local count
  count=$(wc -l <"$tmp/pods.jsonl")
  for ((l = 1; l <= count; l++)); do
    run_pod "$l" "$@"
  done
  wait_pods "$round" "$tmp/pods.jsonl"
}

# wait_pods ROUND FILE...: waits for the pods of FILEs, started by run_pod
# (the coordinator within 120 s, the others within 20 s of it); "NAME RC"
# lines in $tmp/ROUND.rc, each pod's log copied to NAME.ROUND.log.
wait_pods() {
  local round=$1
  shift
  : >"$tmp/$round.rc"
  local chief
  chief=$(jq -r 'select(.role == "chief" or .role == "coordinator") | .name' "$@")
  local order=("$chief")
  mapfile -t -O 1 order < <(jq -r 'select(.role != "chief" and .role != "coordinator") | .name' "$@")
  local limit=120
  for name in "${order[@]}"; do
    local pid waited=0
    pid=$(cat "$tmp/$name.pid")
    while kill -0 "$pid" 2>/dev/null && ((waited < limit * 10)); do
      sleep 0.1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid"
      echo "$name still-running" >>"$tmp/$round.rc"
    fi
    wait "$pid"
    echo "$name $?" >>"$tmp/$round.rc"
    cp "$tmp/$name.log" "$tmp/$name.$round.log"
    limit=20
  done
}

# check_round ROUND WHAT: every pod exited 0.
check_round() {
  local bad_ones
  bad_ones=$(awk '$2 != "0"' "$tmp/$1.rc" | tr '\n' ' ')
  if [[ -z $bad_ones ]]; then
    ok "$2: every pod exited 0 ($(awk '{print $1}' "$tmp/$1.rc" | tr '\n' ' '))"
  else
    bad "$2: pods that did not exit 0: $bad_ones"
    for f in "$tmp"/*."$1".log; do
      echo "--- $f"
      tail -5 "$f"
    done
  fi
}

chief_log() {
  local name
  name=$(jq -r 'select(.role == "chief" or .role == "coordinator") | .name' "$tmp/pods.jsonl")
  echo "$tmp/$name.$1.log"
}

# -- join: pods of a later Job join the running JobSet ------------------------

case_join() {
  # Long enough for two pods to start and join while it trains: about 4 s
  # after the join desk opens, alone on 2 cores; the joins take 0.9-1.7 s.
  local job=(--epochs 4 --train-limit 12800 --test-limit 1000)
  local count chief clog
  count=$(wc -l <"$tmp/pods.jsonl")
  for ((l = 1; l <= count; l++)); do
    run_pod "$l" "${job[@]}"
  done
  chief=$(jq -r 'select(.role == "coordinator") | .name' "$tmp/pods.jsonl")
  clog=$tmp/$chief.log
  if ! wait_for_line "$clog" "workers may join this job at" 60; then
    bad "no join desk: $(tail -3 "$clog")"
    return
  fi
  ok "the coordinator pod: $(grep -o 'workers may join this job at [^ ]*' "$clog")"
  # The Job's pods, as `kubectl apply -f deploy/k8s/jobset-join.yaml` starts
  # them: command to each worker in service.
  local t0 t1 w
  t0=$(date +%s.%N)
  pods=$tmp/join.jsonl run_pod 1 "${job[@]}"
  pods=$tmp/join.jsonl run_pod 2 "${job[@]}"
  for w in 2 3; do
    if wait_for_line "$clog" "worker$w joined the running job" 30; then
      t1=$(date +%s.%N)
      ok "worker $w (pod fmnist-join-$((w - 2))) in service $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after its pod started: $(grep -o "worker$w joined.*" "$clog")"
    else
      bad "worker $w did not join: $(tail -3 "$tmp/fmnist-join-$((w - 2)).log")"
    fi
  done
  wait_pods join "$tmp/pods.jsonl" "$tmp/join.jsonl"
  check_round join "a JobSet joined by 2 pods of a later Job"
  local data
  data=$(grep -o 'data: dynamic shards; .*' "$clog")
  if [[ $data =~ ([0-9]+)\ examples\ trained\ of\ ([0-9]+)\ planned ]] \
     && [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] \
     && [[ $data == *"(each example once per epoch)"* ]]; then
    ok "$data"
  else
    bad "accounting: '$data'; $(grep -o 'closures: .*' "$clog")"
  fi
  # Each joined worker trained closures: the last checkpoint's manifest
  # keeps the end of the last range each worker trained (epoch, offset;
  # both 0 for a worker that trained none).
  local manifest pos
  manifest=$(find "$vol/ckpt" -name manifest.json | sort | tail -1)
  for w in 2 3; do
    pos=$(jq -c ".workers[$w] // empty" "$manifest" 2>/dev/null)
    if [[ -n $pos && $pos != '{"epoch":0,"offset":0}' ]] \
       && grep -q "worker $w: shm\|worker $w: tcp" "$clog" \
       && grep -q "joined the running job through the coordinator at fmnist-coordinator-0-0.fmnist:2222" "$tmp/fmnist-join-$((w - 2)).log"; then
      ok "worker $w trained closures: its last range ended at $pos (${manifest#"$tmp"/})"
    else
      bad "worker $w: $(grep -E 'worker '$w'|worker'$w "$clog" | tail -3); $(tail -3 "$tmp/fmnist-join-$((w - 2)).log")"
    fi
  done
  # A pod of another role with --join: exit 2 before anything starts.
  local line cmd envs rc
  line=$(sed -n 1p "$tmp/join.jsonl")
  mapfile -t cmd < <(jq -r '.command[]' <<<"$line")
  cmd[0]=$bin
  mapfile -t envs < <(jq -r '.env | .REPLICATED_JOB_NAME = "ps" | to_entries[] | "\(.key)=\(.value)"' <<<"$line")
  env -i PATH="$PATH" "${envs[@]}" "${cmd[@]}" "${job[@]}" >"$tmp/bad.log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "only a worker joins" "$tmp/bad.log" \
    && ok "a ps pod with --join: exit 2, $(grep -o 'error: .*' "$tmp/bad.log")" \
    || bad "a ps pod with --join: exit $rc: $(tail -2 "$tmp/bad.log")"
}

if [[ $case == join ]]; then
  case_join
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
  exit
fi

run_all first "${small[@]}"
check_round first "$case, first run"
first_acc=$(grep -o 'done: .*test_accuracy [0-9.]*' "$(chief_log first)" | grep -o '[0-9.]*$')
# Each node listened at its pod's own address, found through its host
# name: the ps and workers all on port 2222, which only distinct addresses
# allow.
ps1=$(jq -r 'select(.role == "ps" and .index == 1) | .host' "$tmp/pods.jsonl")
ps1_ip=$(awk -v h="$ps1" '$2 == h {print $1}' "$tmp/hosts")
ps1_log=$tmp/$(jq -r 'select(.role == "ps" and .index == 1) | .name' "$tmp/pods.jsonl").first.log
listeners=$(grep -h -o 'listening on [^ ]*:2222' "$tmp"/*.first.log | sort -u | wc -l)
getent hosts "$ps1" | grep -q "^$ps1_ip " && grep -q "listening on $ps1:2222" "$ps1_log" \
  && [[ $listeners -eq 4 ]] \
  && ok "$listeners nodes listened on port 2222, each at its pod's name ($ps1 = $ps1_ip)" \
  || bad "listening: $listeners nodes on 2222; ps 1: $(grep -m1 listening "$ps1_log"); $(getent hosts "$ps1")"
# The evaluator scored the job's last checkpoint.
eval_log=$tmp/$(jq -r 'select(.role == "evaluator") | .name' "$tmp/pods.jsonl").first.log
if [[ -n $first_acc ]] && grep -q "epoch 2" "$eval_log" \
   && grep "epoch 2" "$eval_log" | grep -q "test_accuracy $first_acc"; then
  ok "the evaluator pod scored epoch 2: test_accuracy $first_acc, the job's"
else
  bad "the evaluator pod: job accuracy '$first_acc'; $(grep -i 'epoch\|error' "$eval_log" | tail -3)"
fi

# The same pods again, as after a restart: the coordinator resumes.
run_all second --epochs 3 --train-limit 4000 --test-limit 1000
check_round second "$case, restarted with 3 epochs"
grep -q "resumed from" "$(chief_log second)" \
  && ok "restarted pods resumed: $(grep -o 'resumed from.*' "$(chief_log second)" | head -1 | sed "s|$tmp/||")" \
  || bad "restarted pods did not resume: $(grep -i 'resum\|error' "$(chief_log second)" | head -3)"

if [[ $case == jobset ]]; then
  # An incomplete or wrong pod environment: exit 2, naming the variable.
  worker_line=$(jq -r '.role' "$tmp/pods.jsonl" | grep -n '^worker$' | head -1 | cut -d: -f1)
  line=$(sed -n "${worker_line}p" "$tmp/pods.jsonl")
  mapfile -t cmd < <(jq -r '.command[]' <<<"$line")
  cmd[0]=$bin
  for unset_var in JOB_COMPLETION_INDEX JOBSET_NAME; do
    mapfile -t envs < <(jq -r --arg v "$unset_var" '.env | del(.[$v]) | to_entries[] | "\(.key)=\(.value)"' <<<"$line")
    env -i PATH="$PATH" "${envs[@]}" "${cmd[@]}" "${small[@]}" >"$tmp/bad.log" 2>&1
    rc=$?
    [[ $rc -eq 2 ]] && grep -q "$unset_var: not set" "$tmp/bad.log" \
      && ok "without $unset_var: exit 2, $(grep -o "$unset_var: not set[^(]*" "$tmp/bad.log")" \
      || bad "without $unset_var: exit $rc: $(tail -2 "$tmp/bad.log")"
  done
  mapfile -t envs < <(jq -r '.env | .JOB_COMPLETION_INDEX = "5" | to_entries[] | "\(.key)=\(.value)"' <<<"$line")
  env -i PATH="$PATH" "${envs[@]}" "${cmd[@]}" "${small[@]}" >"$tmp/bad.log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "JOB_COMPLETION_INDEX: 5 in replicated job worker" "$tmp/bad.log" \
    && ok "a pod index beyond --workers: exit 2, $(grep -o 'JOB_COMPLETION_INDEX: 5[^(]*' "$tmp/bad.log")" \
    || bad "a pod index beyond --workers: exit $rc: $(tail -2 "$tmp/bad.log")"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
