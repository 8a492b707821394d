#!/usr/bin/env bash
# actorps export on the command line: a good export, and bad input refused
# with exit 2 and a message naming the problem, MODEL_DIR left as it was.
#
# usage: export_cli_test.sh ACTORPS SOURCE_DIR
set -u
actorps=$1
cd "$2" || exit 1
work=$(mktemp -d /tmp/actorps-export-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAILED: $*"; failed=1; }

# expect STATUS PATTERN -- COMMAND...: exit STATUS, stderr or stdout
# matching PATTERN.
expect() {
  local status=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $status ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$* -> exit $rc, expected $status and /$pattern/: $out"
  else
    echo "ok: exit $rc /$pattern/"
  fi
}

a9a=(--config configs/a9a.json --epochs 1)
"$actorps" train "${a9a[@]}" --quiet --no-progress \
  --checkpoint-dir "$work/ckpt" >/dev/null 2>&1 || fail "training a9a"
ckpt=$(ls -d "$work"/ckpt/ckpt-* | tail -1)
expect 0 "exported .* to $work/m/[0-9]+" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$work/ckpt" --out "$work/m"
before=$(ls -A "$work/m")

expect 2 "--checkpoint DIR is missing" -- \
  "$actorps" export "${a9a[@]}" --out "$work/m"
expect 2 "--out MODEL_DIR is missing" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$ckpt"
expect 2 "$work/nowhere is not a directory" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$work/nowhere" --out "$work/m"
mkdir -p "$work/empty"
expect 2 "holds no complete checkpoint" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$work/empty" --out "$work/m"
expect 2 "--table-limit-bytes" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$ckpt" --out "$work/m" \
  --table-limit-bytes lots
# The config of another model: the checkpoint's variables are not its.
expect 2 "variable .* is not one of the model's" -- \
  "$actorps" export --config configs/fashion_mnist.json --checkpoint "$ckpt" \
  --out "$work/m"
# A corrupt checkpoint: a flipped byte in a shard file.
cp -r "$ckpt" "$work/bad"
shard=$(ls "$work"/bad/shard-*.bin | head -1)
printf '\x7f' | dd of="$shard" bs=1 seek=20 conv=notrunc status=none
expect 2 "$shard: checksum mismatch" -- \
  "$actorps" export "${a9a[@]}" --checkpoint "$work/bad" --out "$work/m"
after=$(ls -A "$work/m")
[[ $before == "$after" ]] || fail "MODEL_DIR changed: '$before' -> '$after'"
# Exports while training need checkpoints.
expect 2 "export_dir.*checkpoint_dir" -- \
  "$actorps" train "${a9a[@]}" --export-dir "$work/m2"
# A job exporting as it checkpoints, its checkpoints deltas of a full one:
# the export of a delta is made from its whole chain, the same files
# (manifest aside: times) as `actorps export` of that checkpoint gives.
ctr=(--config configs/synthetic_ctr.json --epochs 1 --train-limit 6000)
"$actorps" train "${ctr[@]}" --quiet --no-progress --checkpoint-every 3 \
  --checkpoint-dir "$work/ctr-ckpt" --export-dir "$work/ctr-m" \
  --export-every 2 >"$work/ctr.log" 2>&1 || fail "training synthetic_ctr"
versions=$(ls "$work/ctr-m" | sort -n | tr '\n' ' ')
echo "exports while training: $versions"
[[ $(wc -w <<<"$versions") -ge 2 ]] || fail "fewer than 2 exports: $versions"
last=$(ls "$work/ctr-m" | sort -n | tail -1)
ckpt=$work/ctr-ckpt/$(printf 'ckpt-%010d' "$last")
grep -q '"kind": *"delta"' "$ckpt/manifest.json" \
  || fail "$ckpt is not a delta checkpoint"
expect 0 "exported" -- "$actorps" export "${ctr[@]}" --checkpoint "$ckpt" \
  --out "$work/ctr-again"
for f in "$work/ctr-m/$last"/*; do
  name=$(basename "$f")
  [[ $name == manifest.json ]] && continue
  cmp -s "$f" "$work/ctr-again/$last/$name" \
    || fail "$name of the export while training differs from actorps export's"
done
echo "ok: export $last (a delta's chain) equals actorps export of $ckpt"
exit $failed
