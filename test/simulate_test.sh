#!/usr/bin/env bash
# `actorps simulate` as a user runs it: the same seed twice gives the same
# digest, another seed another; --record then --replay passes, a replay of
# another run fails naming the event; --out writes JSON lines; bad flags are
# refused with exit 2 and a message naming them; a fault plan runs
# (deterministically); a measured run says it is not reproducible and the
# flag it prints replays it bit for bit.
# usage: simulate_test.sh ACTORPS_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }

job=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a"
     --train-limit 1024 --test-limit 300 --epochs 2 --workers 8 --ps 2
     --network 1gbit,100us --compute normal:1ms,200us --quiet)
digest() { grep -o 'digest [0-9a-f]\{64\}' "$1" | awk '{print $2}'; }

"$bin" simulate "${job[@]}" --seed 7 --record "$tmp/events" \
  --out "$tmp/a.jsonl" >"$tmp/a.txt" 2>&1
rc=$?
"$bin" simulate "${job[@]}" --seed 7 >"$tmp/b.txt" 2>&1
rc_b=$?
"$bin" simulate "${job[@]}" --seed 8 >"$tmp/c.txt" 2>&1
rc_c=$?
a=$(digest "$tmp/a.txt")
if [[ $rc -eq 0 && $rc_b -eq 0 && $rc_c -eq 0 && ${#a} -eq 64 ]]; then
  ok "three simulations ran: $(head -1 "$tmp/a.txt")"
else
  bad "simulate: exit $rc/$rc_b/$rc_c: $(tail -3 "$tmp/a.txt")"
fi
[[ -n $a && $a == "$(digest "$tmp/b.txt")" ]] \
  && ok "the same seed gives the same digest ($a)" \
  || bad "same seed, different digests: $a / $(digest "$tmp/b.txt")"
[[ -n $a && $a != "$(digest "$tmp/c.txt")" ]] \
  && ok "another seed gives another digest" \
  || bad "another seed gave the same digest $a"
events=$(grep -o '[0-9]* events' "$tmp/a.txt" | awk '{print $1}')
if [[ -n $events && $(wc -l <"$tmp/events") -eq $events ]]; then
  ok "--record wrote $events events"
else
  bad "--record: $(wc -l <"$tmp/events") lines, the report says $events"
fi
if [[ $(grep -c '"type":"epoch"' "$tmp/a.jsonl") -eq 2 \
      && $(grep -c '"type":"summary"' "$tmp/a.jsonl") -eq 1 ]] \
   && grep -q "\"digest\":\"$a\"" "$tmp/a.jsonl"; then
  ok "--out: two epoch lines and a summary with the digest"
else
  bad "--out: $(cat "$tmp/a.jsonl")"
fi
"$bin" simulate "${job[@]}" --seed 7 --replay "$tmp/events" >"$tmp/r.txt" 2>&1
rc=$?
[[ $rc -eq 0 && $(digest "$tmp/r.txt") == "$a" ]] \
  && ok "--replay of the recorded run passes" \
  || bad "--replay: exit $rc: $(tail -2 "$tmp/r.txt")"
"$bin" simulate "${job[@]}" --seed 8 --replay "$tmp/events" >"$tmp/x.txt" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q 'replay .*: event [0-9]* differs: recorded' "$tmp/x.txt" \
  && ok "a replay of another run fails naming the first event that differs" \
  || bad "replay of another seed: exit $rc: $(tail -2 "$tmp/x.txt")"

refused() { # WHY EXPECTED-TEXT ARGS...
  local why=$1 text=$2
  shift 2
  "$bin" simulate "${job[@]}" "$@" >"$tmp/e.txt" 2>&1
  local rc=$?
  if [[ $rc -eq 2 ]] && grep -qF -- "$text" "$tmp/e.txt"; then
    ok "refused: $why"
  else
    bad "$why: exit $rc: $(tail -2 "$tmp/e.txt")"
  fi
}
refused "a rate without a unit" 'the rate "10" has no unit' --network 10
refused "priority pulls, which it does not model" \
  'cluster.priority_pulls: the simulator models' --priority-pulls
refused "an unknown latency unit" 'unit "parsecs"' --network 1gbit,5parsecs
refused "a bad compute model" '--compute "fast"' --compute fast
refused "a straggler factor below 1" '--stragglers "5%:0.5x"' --stragglers 5%:0.5x
# --timing-only: the same virtual time as the real run, no test metrics.
"$bin" simulate "${job[@]}" --seed 7 --timing-only >"$tmp/t.txt" 2>&1
rc_t=$?
vt() { grep -o 'samples in [0-9.]* s virtual' "$1"; }
if [[ $rc_t -eq 0 && -n "$(vt "$tmp/t.txt")" \
      && "$(vt "$tmp/t.txt")" == "$(vt "$tmp/a.txt")" ]] \
   && ! grep -q test_auc "$tmp/t.txt"; then
  ok "--timing-only: $(vt "$tmp/t.txt"), as the real run, no metrics"
else
  bad "--timing-only: exit $rc_t: $(vt "$tmp/t.txt") against $(vt "$tmp/a.txt")"
fi
refused "a fault naming a worker the job lacks" 'the job has 8 workers' \
  --fault kill:worker:8@5
# The fault plan runs in virtual time: ps0 killed, its backup takes over,
# every closure applied once per group, and the run is deterministic.
faulty=(--fault kill:ps:0@20 --fault stop:worker:1@10:0.1 --replicas 1
        --seed 7)
"$bin" simulate "${job[@]}" "${faulty[@]}" >"$tmp/f1.txt" 2>&1
rc_f=$?
"$bin" simulate "${job[@]}" "${faulty[@]}" >"$tmp/f2.txt" 2>&1
if [[ $rc_f -eq 0 ]] && grep -q 'ps 0 lost' "$tmp/f1.txt" \
   && grep -q 'closures: 32 finished, [0-9]* re-executed; pushes: 64 applied' \
     "$tmp/f1.txt" \
   && [[ "$(digest "$tmp/f1.txt")" == "$(digest "$tmp/f2.txt")" ]]; then
  ok "faults: $(grep -o 'closures: .*' "$tmp/f1.txt")"
else
  bad "faults: exit $rc_f: $(grep -E 'fault|lost|closures|digest' "$tmp/f1.txt" | tail -6)"
fi
refused "a replay file that is missing" 'cannot read it' --replay "$tmp/none"
refused "workers per machine that do not divide the workers" \
  '--workers-per-machine 3: must be at least 1 and divide the 8 workers' \
  --workers-per-machine 3
refused "workers per machine that are not a number" \
  '--workers-per-machine: expected a whole number >= 1, got "two"' \
  --workers-per-machine two
refused "workers per machine with one host" 'use one' \
  --workers-per-machine 2 --host 2:0.35:1.2
# Four machines of two workers: the report says so, and idle is per machine.
"$bin" simulate "${job[@]}" --seed 7 --workers-per-machine 2 \
  --out "$tmp/m.jsonl" >"$tmp/m.txt" 2>&1
rc_m=$?
if [[ $rc_m -eq 0 ]] && grep -q '4 machines of 2 workers each' "$tmp/m.txt" \
   && grep -q 'machines idle (not computing)' "$tmp/m.txt" \
   && grep -q '"workers_per_machine":2' "$tmp/m.jsonl" \
   && [[ $(grep -o '"idle":\[[^]]*\]' "$tmp/m.jsonl" | tr -cd , | wc -c) -eq 3 ]]; then
  ok "--workers-per-machine 2: $(grep machines "$tmp/m.txt" | head -1)"
else
  bad "--workers-per-machine 2: exit $rc_m: $(tail -4 "$tmp/m.txt")"
fi
# Which runs are reproducible. A run with a given compute model says so on
# its digest line. The default (--compute measured) times real steps here:
# its digest line says it is not reproducible and names the flag that
# replays it; that flag, run twice, gives the measured run's digest both
# times (the measured time is used as a constant one).
grep -q 'digest [0-9a-f]\{64\} (reproducible: ' "$tmp/a.txt" \
  && grep -q '"reproducible":true' "$tmp/a.jsonl" \
  && ok "a run with --compute normal:... says it is reproducible" \
  || bad "reproducible run: $(grep digest "$tmp/a.txt")"
measured=(--config "$src/configs/a9a.json" --data-dir "$src/data/a9a"
          --train-limit 1024 --test-limit 300 --epochs 1 --workers 4 --ps 2
          --network 1gbit,100us --quiet --seed 7)
"$bin" simulate "${measured[@]}" --out "$tmp/d.jsonl" >"$tmp/d.txt" 2>&1
rc_d=$?
replay=$(grep -o 'the same flags followed by --compute const:[0-9]*ns replay this run bit for bit)$' \
           "$tmp/d.txt" | grep -o -- '--compute const:[0-9]*ns')
if [[ $rc_d -eq 0 && -n $replay ]] \
   && grep -q "digest [0-9a-f]\{64\} (not reproducible: " "$tmp/d.txt" \
   && grep -q '"reproducible":false' "$tmp/d.jsonl" \
   && grep -qF "\"replay_flags\":\"$replay\"" "$tmp/d.jsonl"; then
  ok "a measured run's digest line says it is not reproducible and names $replay"
else
  bad "measured run: exit $rc_d: $(grep digest "$tmp/d.txt")"
fi
d=$(digest "$tmp/d.txt")
# shellcheck disable=SC2086 # $replay is two words: the flag and its value
"$bin" simulate "${measured[@]}" $replay >"$tmp/d1.txt" 2>&1
rc_1=$?
# shellcheck disable=SC2086
"$bin" simulate "${measured[@]}" $replay >"$tmp/d2.txt" 2>&1
rc_2=$?
if [[ $rc_1 -eq 0 && $rc_2 -eq 0 && ${#d} -eq 64 \
      && $(digest "$tmp/d1.txt") == "$d" && $(digest "$tmp/d2.txt") == "$d" ]] \
   && grep -q 'digest [0-9a-f]\{64\} (reproducible: ' "$tmp/d1.txt"; then
  ok "$replay replays the measured run twice, digest $d"
else
  bad "replay with $replay: exit $rc_1/$rc_2, digests $d / $(digest "$tmp/d1.txt") / $(digest "$tmp/d2.txt")"
fi
# --host measured times messages here: its flag replays it the same way.
"$bin" simulate "${measured[@]}" --compute const:1ms --host measured \
  >"$tmp/h.txt" 2>&1
rc_h=$?
host=$(grep -o 'the same flags followed by --host [0-9.:e+-]* replay this run' \
         "$tmp/h.txt" | grep -o -- '--host [0-9.:e+-]*')
# shellcheck disable=SC2086 # $host is two words: the flag and its value
"$bin" simulate "${measured[@]}" --compute const:1ms --host measured $host \
  >"$tmp/h1.txt" 2>&1
rc_1=$?
h=$(digest "$tmp/h.txt")
if [[ $rc_h -eq 0 && $rc_1 -eq 0 && -n $host && ${#h} -eq 64 \
      && $(digest "$tmp/h1.txt") == "$h" ]] \
   && grep -q 'digest [0-9a-f]\{64\} (reproducible: ' "$tmp/h1.txt"; then
  ok "--host measured names $host, which replays it (after --host measured)"
else
  bad "--host measured: exit $rc_h/$rc_1, '$host', digests $h / $(digest "$tmp/h1.txt")"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
