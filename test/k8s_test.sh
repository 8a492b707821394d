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
vol=$tmp/vol
mkdir -p "$vol/job" "$vol/ckpt"
cp "$src/configs/fashion_mnist.json" "$vol/job/job.json"
"$bin" certs --ps 2 --workers 2 --out "$vol/certs" >/dev/null 2>&1 \
  || { echo "FAILED: actorps certs"; exit 1; }
small=(--epochs 2 --train-limit 4000 --test-limit 1000)

# The pods; every host name gets its own address.
"$py" "$src/test/tools/k8s_pods.py" "$manifest" \
  --map /etc/actorps/job="$vol/job" --map /etc/actorps/certs="$vol/certs" \
  --map /var/lib/actorps/checkpoints="$vol/ckpt" >"$tmp/pods.jsonl" \
  || { echo "FAILED: $manifest: no pods"; exit 1; }
cp /etc/hosts "$tmp/hosts"
# Each case its own addresses: the two may run at once (ctest -j), on the
# same port.
n=20
[[ $case == jobset ]] && n=40
while read -r host; do
  echo "127.0.0.$n $host" >>"$tmp/hosts"
  n=$((n + 1))
done < <(jq -r '.host' "$tmp/pods.jsonl")
mount --bind "$tmp/hosts" /etc/hosts || { echo "FAILED: mount --bind"; exit 1; }
echo "pods: $(jq -r '.name' "$tmp/pods.jsonl" | tr '\n' ' ')"

# run_pod LINE [FLAGS...]: pod LINE of pods.jsonl in the background, its
# environment only (plus PATH), the manifest's command with FLAGS appended.
run_pod() {
  local line=$1
  shift
  local name cmd=() envs=()
  name=$(sed -n "${line}p" "$tmp/pods.jsonl" | jq -r '.name')
  mapfile -t cmd < <(sed -n "${line}p" "$tmp/pods.jsonl" | jq -r '.command[]')
  mapfile -t envs < <(sed -n "${line}p" "$tmp/pods.jsonl" \
                        | jq -r '.env | to_entries[] | "\(.key)=\(.value)"')
  [[ ${cmd[0]} == actorps ]] && cmd[0]=$bin
  env -i PATH="$PATH" "${envs[@]}" "${cmd[@]}" "$@" >"$tmp/$name.log" 2>&1 &
  echo $! >"$tmp/$name.pid"
  pids+=($!)
}

# run_all ROUND FLAGS...: every pod; waits for each (the coordinator within
# 120 s, the others within 20 s of it); "NAME RC" lines in $tmp/ROUND.rc.
run_all() {
  local round=$1
  shift
  local count
  count=$(wc -l <"$tmp/pods.jsonl")
  for ((l = 1; l <= count; l++)); do
    run_pod "$l" "$@"
  done
  : >"$tmp/$round.rc"
  local chief
  chief=$(jq -r 'select(.role == "chief" or .role == "coordinator") | .name' "$tmp/pods.jsonl")
  local order=("$chief")
  mapfile -t -O 1 order < <(jq -r 'select(.role != "chief" and .role != "coordinator") | .name' "$tmp/pods.jsonl")
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
