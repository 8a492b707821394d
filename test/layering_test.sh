#!/usr/bin/env bash
# The layering of the source, as a test: every #include "..." of core/,
# models/, actors/, cluster/, apps/ and bench/ names a file of its own layer or room
# or of one it may use (the table below), so that a wrong include fails here
# instead of compiling quietly (every target sees the repository root).
#
# Layers, each using those to its left:  core -> models -> actors -> cluster
# -> apps. cluster/ has rooms, each a CMake target (actorps_cluster_ROOM),
# in one dependency order:
#   spec      where the cluster's members are (cluster_spec, resolvers)
#   net       gates, dialing, TLS, handshakes, authorization, data channel
#   job       the `cluster` interface, job setup, evaluation, system config
#   services  fit, checkpoints, reports, plots, the metrics endpoint
#   topology  the cluster in one process or many: local, remote, node, trainer
#   launch    starting nodes: local children, Slurm job steps
#   sim       the deterministic simulator
#   serve     predictions over HTTP from an export (no actors)
# test/, fuzz/ and apps/examples/ may include anything.
#
# usage: layering_test.sh SOURCE_DIR         check the tree
#        layering_test.sh --self-test        show that a wrong include fails
set -u

# What each layer or room may include (besides itself and system headers).
declare -A may=(
  [core]=""
  [models]="core"
  [actors]="core models"
  [cluster/spec]="core"
  [cluster/net]="core models actors cluster/spec"
  [cluster/job]="core models actors"
  [cluster/services]="core models actors cluster/spec cluster/net cluster/job"
  [cluster/topology]="core models actors cluster/spec cluster/net cluster/job cluster/services"
  [cluster/launch]="core cluster/spec"
  [cluster/sim]="core models actors cluster/spec cluster/net cluster/job cluster/services cluster/topology"
  [cluster/serve]="core models"
  [apps]="core models actors cluster/spec cluster/net cluster/job cluster/services cluster/topology cluster/launch cluster/sim cluster/serve"
  [bench]="core models actors cluster/spec cluster/net cluster/job cluster/services cluster/topology cluster/launch cluster/sim cluster/serve"
)

# The layer or room of a path ("cluster/net/gate.hpp" -> cluster/net,
# "core/rules/sgd.cpp" -> core); empty for a path outside them.
unit_of() {
  case $1 in
    cluster/*/*) local r=${1#cluster/}; echo "cluster/${r%%/*}" ;;
    cluster/*) echo "cluster" ;; # a file left in the corridor
    core/* | models/* | actors/* | apps/* | bench/*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}

check() {
  local src=$1 bad=0 files=0 includes=0
  cd "$src" || return 2
  while IFS= read -r f; do
    [[ $f == apps/examples/* ]] && continue
    local from
    from=$(unit_of "$f")
    if [[ -z ${may[$from]+x} ]]; then
      echo "$f: not in a layer or room of the table (cluster/ files belong in a room)"
      bad=$((bad + 1))
      continue
    fi
    files=$((files + 1))
    while IFS=: read -r line inc; do
      includes=$((includes + 1))
      local to
      to=$(unit_of "$inc")
      [[ -z $to || $to == "$from" ]] && continue
      if [[ " ${may[$from]} " != *" $to "* ]]; then
        echo "$f:$line includes $inc: $from may include only ${may[$from]:-itself} (test/layering_test.sh)"
        bad=$((bad + 1))
      fi
    done < <(grep -n -o -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" \
               | sed -E 's/^([0-9]+):.*"([^"]+)"/\1:\2/')
  done < <(find $(ls -d core models actors cluster apps bench 2>/dev/null) -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \) | sort)
  echo "$files files, $includes includes, $bad outside the table"
  ((bad == 0 && files > 0))
}

if [[ ${1:-} == --self-test ]]; then
  here=$(cd "$(dirname "$0")" && pwd)
  tmp=$(mktemp -d /tmp/actorps-layering-XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"/{core,models,actors,apps} "$tmp"/cluster/{net,topology}
  echo '#include "core/a.hpp"' >"$tmp/models/m.cpp"
  echo '#include "cluster/net/gate.hpp"' >"$tmp/cluster/topology/node.cpp"
  echo '#include <vector>' >"$tmp/core/a.hpp"
  out=$("$here/layering_test.sh" "$tmp") || { echo "FAILED: a good tree was refused: $out"; exit 1; }
  echo "ok: a good tree passes: $out"
  # An upward include (a room below including one above it)...
  echo '#include "cluster/topology/node.hpp"' >>"$tmp/cluster/net/gate.cpp"
  if out=$("$here/layering_test.sh" "$tmp"); then
    echo "FAILED: cluster/net including cluster/topology passed: $out"; exit 1
  fi
  grep -q 'cluster/net/gate.cpp:1 includes cluster/topology/node.hpp' <<<"$out" \
    && echo "ok: refused: $(head -1 <<<"$out")" \
    || { echo "FAILED: no line names the include: $out"; exit 1; }
  rm "$tmp/cluster/net/gate.cpp"
  # ... a layer including one above it, and a file left in the corridor.
  echo '#include "actors/ps_actor.hpp"' >"$tmp/core/b.cpp"
  echo '#include "core/a.hpp"' >"$tmp/cluster/loose.cpp"
  if out=$("$here/layering_test.sh" "$tmp"); then
    echo "FAILED: core including actors passed: $out"; exit 1
  fi
  grep -q 'core/b.cpp:1 includes actors/ps_actor.hpp' <<<"$out" \
    && grep -q 'cluster/loose.cpp: not in a layer or room' <<<"$out" \
    && echo "ok: refused: $(grep -c -E ':[0-9]+ includes |: not in ' <<<"$out") wrong files" \
    || { echo "FAILED: $out"; exit 1; }
  exit 0
fi

check "${1:?usage: layering_test.sh SOURCE_DIR | --self-test}"
