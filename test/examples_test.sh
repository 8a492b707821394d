#!/usr/bin/env bash
# Runs one example program of apps/examples and checks that its loss falls.
# An example prints lines "loss N VALUE ..." (N: epoch or round); there must
# be at least two, every VALUE a finite number, and the last below the first.
#
#   test/examples_test.sh build/custom_model
set -uo pipefail
prog=${1:?usage: examples_test.sh PROGRAM}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$prog" >"$out" 2>/dev/null
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAILED: $prog exited with status $rc:"
  cat "$out"
  exit 1
fi
awk -v prog="$(basename "$prog")" '
  $1 == "loss" {
    n++
    if ($3 !~ /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) bad = bad " " $3
    v = $3 + 0
    if (n == 1) first = v
    last = v
  }
  END {
    if (n < 2 || bad != "" || !(last < first)) {
      printf "FAILED: %s: %d loss values (not numbers:%s), first %s, last %s\n",
             prog, n, bad, first, last
      exit 1
    }
    printf "ok: %s: loss %g -> %g over %d values\n", prog, first, last, n
  }' "$out"
