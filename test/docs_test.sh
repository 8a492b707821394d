#!/usr/bin/env bash
# Every command of the ```sh blocks of one document (README.md or
# docs/NAME.md), run as written, so that a documented command cannot break
# silently.
#
# Each block runs in a scratch folder of its own that looks like the
# repository root to its commands (build/ is this build; configs/, data/,
# scripts/ and fuzz/ link to the source tree), its commands in order, as a
# user pastes them. How a
# command is run is decided by the first rule below whose pattern (a bash
# glob) matches it; a command that no rule names is run and must exit 0:
#   run              exit 0 (the default; at most 300 s)
#   first REGEX      a job that trains for a while: run until a line of its
#                    output matches REGEX (its first epoch line) or it exits;
#                    it passes if that line came (then it is stopped, its
#                    whole process group) or it exited 0
#   bg_stop          a command ending in &: left running until the block's
#                    last command is done, then stopped; it fails only if
#                    it exited with a status other than 0 before that
#   skip REASON      not run here, for REASON (printed)
#   check CMD REASON not run (REASON); CMD, which must exit 0, checks what
#                    can be checked of it here instead ($CMD_FILE holds the
#                    command)
# and, before the policy, modifiers:
#   slurm            run inside a one-node Slurm cluster of this machine
#                    (test/slurm_cluster.sh, as test/slurm_test.sh uses)
#   alloc N          ... and inside an allocation of N tasks (salloc -n N),
#                    for commands the document says to run inside one
#   env VAR=VALUE    with VAR set (e.g. DESTDIR for `cmake --install`)
# A command ending in & without a rule runs in the background and must exit
# 0 by the end of its block (it is waited for, at most 300 s).
# `A && B` on one line is two commands, B run only if A passed or was
# skipped. A rule that matches no command of its document fails the test
# (the document changed: the rule is stale), as does a command that fails.
# For README.md it also checks that each ```cpp block holding a main() is an
# example of apps/examples/ from its first #include on; for
# docs/reference/config.md, that it is what `actorps config-reference`
# prints (a document without sh blocks passes on that check alone).
#
# usage: docs_test.sh BUILD_DIR SOURCE_DIR DOCUMENT
#   e.g. docs_test.sh build . README.md;  docs_test.sh build . docs/guide/slurm.md
set -u
build=$(cd "$1" && pwd) || exit 1
src=$(cd "$2" && pwd) || exit 1
doc=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/actorps-docs-XXXXXX)
chmod 755 "$work"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok [${SECONDS}s]: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED [${SECONDS}s]: $1"; }
note() { echo "not run: $1"; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0 && passed > 0))
  exit
}

# -- the rules ------------------------------------------------------------------

rule_doc=() rule_pat=() rule_mod=() rule_pol=() rule_arg=() rule_why=() rule_used=()
current_doc=
# rule PATTERN [slurm] [alloc N] [env VAR=VALUE] POLICY [ARG] [REASON]
rule() {
  local pat=$1 mod=""
  shift
  while :; do
    case $1 in
      slurm) mod+="slurm "; shift ;;
      alloc) mod+="alloc=$2 "; shift 2 ;;
      env) mod+="env=$2 "; shift 2 ;;
      *) break ;;
    esac
  done
  local pol=$1 arg="" why=""
  case $pol in
    first | check) arg=$2; why=${3:-} ;;
    skip) why=$2 ;;
  esac
  rule_doc+=("$current_doc") rule_pat+=("$pat") rule_mod+=("$mod")
  rule_pol+=("$pol") rule_arg+=("$arg") rule_why+=("$why") rule_used+=(0)
}

# An epoch line of train, launch, node and the netns script (prefixed).
epoch='epoch +[0-9]+/[0-9]+ +train_loss'
built="scripts/build.sh installs the Debian packages and builds build/, the build this test belongs to (CI's .ci/run runs it)"

current_doc=README.md
rule 'scripts/build.sh' skip "$built"
rule 'scripts/build.sh --all' skip "$built"
rule 'ctest --test-dir build --output-on-failure' skip "the whole suite, of which this test is a part"
rule 'ctest --test-dir build -LE slow*' skip "the suite without its slow cases, of which this test is a part"
rule 'build/actorps train --config configs/fashion_mnist.json' first "$epoch"
rule 'build/actorps train --config configs/fashion_mnist.json --workers 4 *' first "$epoch"
rule 'build/actorps launch --config configs/fashion_mnist.json --workers 2 --ps 2 --epochs 3*' first "$epoch"
rule 'build/actorps launch --config configs/a9a.json *' first "$epoch"
rule 'build/actorps train --config configs/synthetic_ctr.json' first "$epoch"

current_doc=docs/testing.md
rule 'ctest --test-dir build -LE slow*' skip "the suite without its slow cases, of which this test is a part"

current_doc=docs/guide/cluster.md
rule 'build/actorps launch --config configs/fashion_mnist.json --workers 2 --ps 2 --epochs 3*' first "$epoch"
rule 'build/actorps node --role ps *' bg_stop
rule 'build/actorps node --role worker *' bg_stop
rule 'build/actorps node --role coordinator *' first "$epoch"

current_doc=docs/guide/netns.md
rule 'scripts/netns-cluster.sh --link 1gbit *' first "$epoch"
rule 'scripts/netns-cluster.sh --link 100mbit --partition *' first "$epoch"

current_doc=docs/guide/library.md
rule 'cmake --install build --prefix /opt/actorps' env "DESTDIR=$work/destdir" run

current_doc=docs/guide/slurm.md
rule 'srun -n 5 build/actorps node --cluster-resolver slurm *' slurm first "$epoch"
rule 'build/actorps launch --launcher slurm *' slurm alloc 5 first "$epoch"
# shellcheck disable=SC2016 # $CMD_FILE is the check's, not ours
rule '#!/bin/bash #SBATCH --job-name=grow *' check 'bash -n "$CMD_FILE"' \
  "a batch script that runs 10 epochs and joins a worker to it; test/slurm_test.sh's case join (ctest slurm.join) runs the same sequence (launch in the background, the spec written, srun -n 1 --exact actorps node --join) on a one-node cluster; checked: it parses (bash -n)"
# shellcheck disable=SC2016 # $CMD_FILE is the check's, not ours
rule '#!/bin/bash*' check 'bash -n "$CMD_FILE"' \
  "an sbatch script for a cluster of 2 hosts (--nodes=2) and 30 epochs; test/slurm_test.sh runs what it does (srun with the resolver, SIGTERM with a checkpoint, exit 75, scontrol requeue, --resume) on a one-node cluster; checked: it parses (bash -n)"

current_doc=docs/guide/kubernetes.md
k8s="no Kubernetes here: the ctests k8s.tfjob and k8s.jobset start the pods of deploy/k8s/'s manifests on this machine (test/k8s_test.sh)"
rule 'kubectl *' skip "$k8s"

current_doc=docs/fuzzing.md
campaign="a fuzzing campaign: a clang build of build-fuzz/ with sanitizers (many minutes on 2 cores), then minutes per target; the ctests fuzz.replay.* run every target on its corpus"
rule 'apt-get install clang libclang-rt-14-dev*' check \
  'apt-cache show --no-all-versions clang libclang-rt-14-dev >/dev/null' \
  "a test does not install packages (the machine's apt-get would); checked: apt knows both packages"
rule 'scripts/fuzz.sh 300*' skip "$campaign"
rule 'FUZZ_PARALLEL=1 scripts/fuzz.sh *' skip "$campaign"
rule 'FUZZ_PARALLEL=2 scripts/fuzz.sh *' skip "$campaign"
rule 'fuzz/keep_corpus.py *' skip "needs a campaign's build-fuzz/ (above), and writes into the repository's fuzz/corpus"

current_doc=docs/guide/serving.md
rule 'build/actorps serve models/a9a --port 8501 &' bg_stop

current_doc=docs/guide/simulation.md
sweep_row='^(ssp [0-9]+|async|tau [0-9]+) +[0-9.]+ '
rule 'scripts/sim_ssp_sweep.sh 16 0.6*' first "$sweep_row"
rule 'NET=100gbit,10us scripts/sim_ssp_sweep.sh 16 0.6*' first "$sweep_row"
rule 'PS=8 NET=100gbit,10us *' first "$sweep_row"
rule 'DELAY=1 CONFIG=configs/a9a.json *' first "$sweep_row"
rule '*scripts/sim_staleness.sh 3*' first '^\| [0-9]+ \| [^|]+ \| [0-9.]+ \|'

# -- the blocks ---------------------------------------------------------------

[[ -f $src/$doc ]] || { bad "no document $src/$doc"; finish; }
# blocks/N: the text of the N-th ```sh block; blocks/N.line: its first line.
mkdir -p "$work/blocks"
awk -v dir="$work/blocks" '
  /^```/ { if (inside) { inside = 0; close(f); next }
           if ($0 == "```sh") { inside = 1; n++; f = dir "/" n
                                print NR + 1 > (f ".line"); close(f ".line")
                                printf "" > f; next } }
  inside { print > f }' "$src/$doc"
mapfile -t blocks < <(find "$work/blocks" -name '[0-9]*' ! -name '*.line' -printf '%f\n' | sort -n)
echo "$doc: ${#blocks[@]} sh blocks"

# commands FILE: the block's commands, NUL-separated: one per logical line
# (continuations and multi-line quotes joined, as bash reads them); a block
# that starts with #! is one command (a script).
commands() {
  local acc="" line
  if [[ $(head -c2 "$1") == '#!' ]]; then
    printf '%s\0' "$(cat "$1")"
    return
  fi
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ -z $acc && ( $line =~ ^[[:space:]]*$ || $line =~ ^[[:space:]]*# ) ]]; then
      continue
    fi
    acc+="$line"$'\n'
    [[ $line == *\\ ]] && continue
    if bash -n <<<"$acc" 2>/dev/null; then
      printf '%s\0' "${acc%$'\n'}"
      acc=""
    fi
  done <"$1"
  [[ -n $acc ]] && printf '%s\0' "$acc"
}

# flat TEXT: the command on one line, for matching and messages.
flat() {
  local t=${1//$'\\\n'/ }
  t=${t//$'\n'/ }
  echo "$t" | tr -s ' '
}

# find_rule TEXT: sets r to the index of the first rule matching, or -1.
find_rule() {
  local f i
  f=$(flat "$1")
  r=-1
  for i in "${!rule_pat[@]}"; do
    [[ ${rule_doc[$i]} == "$doc" ]] || continue
    # shellcheck disable=SC2053 # the pattern is a glob on purpose
    if [[ $f == ${rule_pat[$i]} ]]; then
      r=$i
      rule_used[i]=1
      return
    fi
  done
}

# -- the one-node Slurm cluster, started for the first command that needs it -

slurm_up=0
slurm_env() {
  if ((slurm_up == 0)); then
    slurm_up=1
    # shellcheck source=slurm_cluster.sh
    source "$here/slurm_cluster.sh"
    tmp=$work/slurm
    mkdir -p "$tmp"
    chmod 755 "$tmp"
    daemons=()
    setsid bash "$here/slurm_cluster.sh" --reap "$tmp" "$$" </dev/null >/dev/null 2>&1 &
    start_slurm
  fi
}
cleanup() {
  if ((slurm_up)); then
    teardown "$tmp"
    wait "${daemons[@]}" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# stop PID...: SIGTERM to their process groups at once, SIGKILL to those
# left after 10 s (a ps or worker node ignores SIGTERM until its coordinator
# ends the job), then reaps them.
stop() {
  local i p left
  for p in "$@"; do kill -TERM -- "-$p" 2>/dev/null; done
  for ((i = 0; i < 100; i++)); do
    left=0
    for p in "$@"; do kill -0 -- "-$p" 2>/dev/null && left=1; done
    ((left)) || break
    sleep 0.1
  done
  for p in "$@"; do
    kill -KILL -- "-$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  return 0
}

# launch DIR N TEXT MOD: starts command TEXT in DIR in a process group of its
# own, output to DIR/.out.N; sets pid.
launch() {
  local dir=$1 n=$2 text=$3 mod=$4 m pre=()
  for m in $mod; do
    case $m in
      slurm) slurm_env
             pre+=(env "SLURM_CONF=$tmp/slurm.conf" "ACTORPS_SLURM_TEST=$tmp") ;;
      alloc=*) pre+=(salloc --quiet -n "${m#alloc=}") ;;
      env=*) pre+=(env "${m#env=}") ;;
    esac
  done
  printf '%s\n' "$text" >"$dir/.cmd.$n"
  (cd "$dir" && exec setsid "${pre[@]}" bash "$dir/.cmd.$n" </dev/null >"$dir/.out.$n" 2>&1) &
  pid=$!
}

# tail_of FILE: the last lines of a command's output, for a message.
tail_of() { tail -n 4 "$1" 2>/dev/null | cut -c1-240 | sed 's/^/    | /'; }

# run_block N: runs the commands of block N in a scratch folder of its own.
run_block() {
  local n=$1 line dir text base rc i
  line=$(cat "$work/blocks/$n.line")
  dir=$work/b$n
  mkdir -p "$dir"
  chmod 755 "$dir"
  # What the commands read; not bench/ or docs/, so that a command that
  # writes there (into the checkout) fails here.
  for base in configs data scripts fuzz; do
    ln -s "$src/$base" "$dir/$base"
  done
  ln -s "$build" "$dir/build"
  local cmds=() bg_pid=() bg_text=() bg_stop=() bg_out=() bg_done=() stopping=()
  mapfile -d '' -t cmds < <(commands "$work/blocks/$n")
  local k=0 prev=0 part parts
  for text in "${cmds[@]}"; do
    # A && B on one line: two commands, B only if A passed or was skipped.
    parts=("$text")
    if [[ $text != *$'\n'* && $text == *' && '* ]]; then
      parts=()
      local rest=$text
      while [[ $rest == *' && '* ]]; do
        parts+=("${rest%% && *}")
        rest=${rest#* && }
      done
      parts+=("$rest")
    fi
    prev=0
    for part in "${parts[@]}"; do
      k=$((k + 1))
      local where
      where="$doc:$line, command $k: $(flat "$part" | cut -c1-150)"
      if ((prev != 0)); then
        bad "$where: not run, the command before it on its line failed"
        continue
      fi
      find_rule "$part"
      local pol=run arg="" why="" mod=""
      if ((r >= 0)); then
        pol=${rule_pol[$r]} arg=${rule_arg[$r]} why=${rule_why[$r]} mod=${rule_mod[$r]}
      fi
      local trimmed
      trimmed=$(flat "$part" | sed 's/[[:space:]]*#[^"'\'']*$//; s/[[:space:]]*$//')
      if [[ $trimmed == *'&' ]]; then
        launch "$dir" "$k" "${part%&*}" "$mod"
        bg_pid+=("$pid") bg_text+=("$where") bg_stop+=("$([[ $pol == bg_stop ]] && echo 1 || echo 0)")
        bg_out+=("$dir/.out.$k")
        continue
      fi
      case $pol in
        skip)
          note "$where: $why"
          continue ;;
        check)
          printf '%s\n' "$part" >"$dir/.cmd.$k"
          if (cd "$dir" && CMD_FILE="$dir/.cmd.$k" bash -c "$arg") >"$dir/.out.$k" 2>&1; then
            ok "$where: not run ($why)"
          else
            bad "$where: check '$arg' failed:"$'\n'"$(tail_of "$dir/.out.$k")"
            prev=1
          fi
          continue ;;
      esac
      local t0=$SECONDS
      launch "$dir" "$k" "$part" "$mod"
      if [[ $pol == first ]]; then
        rc=""
        while :; do
          if grep -qE -- "$arg" "$dir/.out.$k" 2>/dev/null; then
            if kill -0 "$pid" 2>/dev/null; then
              # The block's nodes in the background served it up to here:
              # stopped with it.
              stopping=()
              settle_bg 1
              stop "$pid" "${stopping[@]}"
              ok "$where: $(grep -m1 -E -- "$arg" "$dir/.out.$k" | cut -c1-120) ... (stopped there by the test after $((SECONDS - t0)) s)"
              break
            fi
          fi
          if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            rc=$?
            if ((rc == 0)) && grep -qE -- "$arg" "$dir/.out.$k"; then
              ok "$where: exit 0 after $((SECONDS - t0)) s"
            else
              bad "$where: exit $rc after $((SECONDS - t0)) s without a line matching /$arg/ before it:"$'\n'"$(tail_of "$dir/.out.$k")"
              prev=1
            fi
            break
          fi
          if ((SECONDS - t0 > 300)); then
            stop "$pid"
            bad "$where: no line matching /$arg/ within 300 s:"$'\n'"$(tail_of "$dir/.out.$k")"
            prev=1
            break
          fi
          sleep 0.2
        done
      else
        while kill -0 "$pid" 2>/dev/null && ((SECONDS - t0 <= 300)); do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
          stop "$pid"
          bad "$where: still running after 300 s:"$'\n'"$(tail_of "$dir/.out.$k")"
          prev=1
        else
          wait "$pid"
          rc=$?
          if ((rc == 0)); then
            ok "$where: exit 0 after $((SECONDS - t0)) s"
          else
            bad "$where: exit $rc:"$'\n'"$(tail_of "$dir/.out.$k")"
            prev=1
          fi
        fi
      fi
    done
  done
  settle_bg 0
}

# settle_bg ONLY_STOP: the background commands of the block that run_block
# runs, each once: one to stop (bg_stop) is stopped if it still runs, and
# fails if it exited otherwise than 0 before; with ONLY_STOP 0, each of the
# others must exit 0 within 300 s.
settle_bg() {
  local i p t0 rc
  for i in "${!bg_pid[@]}"; do
    p=${bg_pid[$i]} t0=$SECONDS
    [[ ${bg_done[$i]:-0} == 1 ]] && continue
    ((bg_stop[i] == 0 && $1 == 1)) && continue
    bg_done[i]=1
    if ((bg_stop[i])) && kill -0 "$p" 2>/dev/null; then
      if (($1 == 1)); then
        stopping+=("$p") # by the caller, with the command it served
      else
        stop "$p"
      fi
      ok "${bg_text[$i]}: ran in the background until its block's later command had done its part (stopped then by the test)"
      continue
    fi
    while kill -0 "$p" 2>/dev/null && ((SECONDS - t0 <= 300)); do sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then
      stop "$p"
      bad "${bg_text[$i]}: still running 300 s after its block:"$'\n'"$(tail_of "${bg_out[$i]}")"
      continue
    fi
    wait "$p"
    rc=$?
    if ((rc == 0)); then
      ok "${bg_text[$i]}: exit 0 (in the background)"
    else
      bad "${bg_text[$i]}: exit $rc (in the background):"$'\n'"$(tail_of "${bg_out[$i]}")"
    fi
  done
}

for n in "${blocks[@]}"; do
  run_block "$n"
done

for i in "${!rule_pat[@]}"; do
  if [[ ${rule_doc[$i]} == "$doc" && ${rule_used[$i]} == 0 ]]; then
    bad "the rule '${rule_pat[$i]}' matches no command of $doc: the document changed; update the rule"
  fi
done

# -- README.md: the fit program -------------------------------------------------

if [[ $doc == README.md ]]; then
  # Each ```cpp block with a main() is an example of apps/examples/, from
  # its first #include on.
  mkdir -p "$work/cpp"
  awk -v dir="$work/cpp" '
    /^```/ { if (inside) { inside = 0; close(f); next }
             if ($0 == "```cpp") { inside = 1; n++; f = dir "/" n; printf "" > f; next } }
    inside { print > f }' "$src/$doc"
  programs=0
  for f in "$work"/cpp/*; do
    [[ -f $f ]] && grep -q 'int main(' "$f" || continue
    programs=$((programs + 1))
    match=
    for ex in "$src"/apps/examples/*.cpp; do
      if sed -n '/^#include/,$p' "$ex" | cmp -s - "$f"; then
        match=$ex
      fi
    done
    if [[ -n $match ]]; then
      ok "the README's program '$(grep -m1 'int main(' "$f")' is ${match#"$src"/}"
    else
      bad "the README's cpp block with '$(grep -m1 'int main(' "$f")' is no example of apps/examples/ (from its first #include on)"
    fi
  done
  ((programs > 0)) || bad "the README shows no complete program (a cpp block with main())"
fi

# -- docs/reference/config.md: generated from the option table ----------------

if [[ $doc == docs/reference/config.md ]]; then
  # The committed page is what `actorps config-reference` prints now (the
  # option table, core/job_options.cpp).
  if diff -q <("$build/actorps" config-reference) "$src/$doc" >/dev/null; then
    ok "$doc is what actorps config-reference prints ($(grep -c '^| `' "$src/$doc") rows)"
  else
    bad "$doc is not current: run build/actorps config-reference > $doc"
  fi
fi
finish
