#!/usr/bin/env bash
# Memory of a streaming job, part by part: runs an actorps command line
# (train or launch on --data-stream) and, at each "part N" line it prints,
# samples the resident memory (VmRSS) of the process (train) or of each
# parameter server (launch: the processes started with --role ps). Prints
# "part N: rss NAME MB ..." lines, then the job's summary lines.
#   bench/stream_memory.sh build/actorps train --config configs/stream_ctr.json --data-stream DIR ...
set -u
bin=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" "$@" --no-progress >"$out" 2>&1 &
job=$!
seen=0
rss_of() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
sample() {
  local line="part $1:"
  if [[ $2 == launch ]]; then
    for p in $(pgrep -f -- "--role ps"); do
      local idx
      idx=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -o -- '--index [0-9]*' | cut -d' ' -f2)
      line+=" ps${idx:-?} $(rss_of "$p") MB"
    done
  else
    line+=" rss $(rss_of "$job") MB"
  fi
  echo "$line"
}
while kill -0 "$job" 2>/dev/null; do
  n=$(grep -c -E '^(\[coordinator\] )?part ' "$out")
  if [[ $n -gt $seen ]]; then
    seen=$n
    sample "$n" "$1"
  fi
  sleep 0.2
done
wait "$job"
rc=$?
grep -E '(^|\] )(part |done:|stream:|tables:|memory:|closures:)' "$out" | tail -8
grep -E 'table|evict|admit' "$out" | grep -v '^part' | tail -4
exit $rc
