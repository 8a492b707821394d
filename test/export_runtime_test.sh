#!/usr/bin/env bash
# The independent-runtime check of `actorps export` (issue 36): trains
# Fashion-MNIST's MLP and a9a's logistic regression briefly, exports each,
# runs the exported model.onnx with ONNX Runtime (npm onnxruntime-node,
# installed by scripts/setup.sh into /opt/actorps-node) on the whole test
# split, and compares its probabilities with the evaluator's predictions on
# the checkpoint (test/tools/export_feeds.cpp) within 1e-5. a9a twice: its
# table inside the ONNX file (Gather), and in a table file (the graph then
# takes the looked-up rows); and the synthetic click log's embedding_mlp,
# its tables some inside the ONNX file, some in table files.
#
# Exits 77 (skipped) only where Node.js or onnxruntime-node is missing,
# saying why.
#
# usage: export_runtime_test.sh ACTORPS EXPORT_FEEDS SOURCE_DIR
set -u
actorps=$1
feeds_tool=$2
src=$3
modules=${ACTORPS_NODE_MODULES:-/opt/actorps-node/node_modules}
if ! command -v node >/dev/null; then
  echo "skipped: no node (Node.js) on PATH; scripts/setup.sh installs it"
  exit 77
fi
if [[ ! -d $modules/onnxruntime-node ]]; then
  echo "skipped: $modules/onnxruntime-node is missing (scripts/setup.sh" \
       "installs it with npm; it could not, or was not run)"
  exit 77
fi
if ! node -e "require('$modules/onnxruntime-node')" 2>/tmp/ort-load-$$; then
  echo "skipped: onnxruntime-node does not load here: $(head -c 300 /tmp/ort-load-$$)"
  rm -f /tmp/ort-load-$$
  exit 77
fi
rm -f /tmp/ort-load-$$
work=$(mktemp -d /tmp/actorps-export-rt-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
failed=0

# check NAME CONFIG EXPORT_FLAGS -- TRAIN_FLAGS...
check() {
  local name=$1 config=$2 export_flags=$3
  shift 3
  local dir=$work/$name
  mkdir -p "$dir/feeds"
  echo "== $name"
  if ! "$actorps" train --config "$config" --quiet --no-progress \
         --checkpoint-dir "$dir/ckpt" "$@" >"$dir/train.log" 2>&1; then
    echo "FAILED: training"; tail -5 "$dir/train.log"; failed=1; return
  fi
  # shellcheck disable=SC2086
  if ! "$actorps" export --config "$config" --checkpoint "$dir/ckpt" \
         --out "$dir/model" $export_flags "$@"; then
    echo "FAILED: export"; failed=1; return
  fi
  local version
  version=$(ls "$dir/model")
  local ckpt
  ckpt=$(ls -d "$dir"/ckpt/ckpt-* | tail -1)
  if ! "$feeds_tool" "$config" "$ckpt" "$dir/model/$version" "$dir/feeds"; then
    echo "FAILED: export_feeds"; failed=1; return
  fi
  # ONNX's own checker (python3-onnx), full check with shape inference.
  local py=python3
  [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
  if "$py" -c 'import onnx' 2>/dev/null; then
    if "$py" -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' \
         "$dir/model/$version/model.onnx"; then
      echo "onnx.checker: model.onnx is valid (opset 13, full check)"
    else
      echo "FAILED: onnx.checker"; failed=1
    fi
  else
    echo "onnx.checker not run: python3-onnx is not installed"
  fi
  if ! node "$src/test/export_runtime_check.js" "$modules" \
         "$dir/model/$version/model.onnx" "$dir/feeds" 1e-5; then
    failed=1
  fi
}

check fashion_mnist configs/fashion_mnist.json "" --epochs 1 --train-limit 6000
check a9a configs/a9a.json "" --epochs 1
check a9a_table_file configs/a9a.json "--table-limit-bytes 0" --epochs 1
# embedding_mlp (26 tables, mean combiner): the small tables inside the
# ONNX file (8 MiB of them), the larger ones in table files.
check synthetic_ctr configs/synthetic_ctr.json "--table-limit-bytes 8388608" \
  --epochs 1 --train-limit 20000
exit $failed
