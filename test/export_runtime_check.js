// Runs an exported model.onnx with ONNX Runtime (npm onnxruntime-node, an
// implementation independent of actorps) on the feeds export_feeds wrote
// and compares its "probabilities" with the evaluator's predictions.
//
//   node export_runtime_check.js MODULE_DIR MODEL_ONNX FEEDS_DIR TOLERANCE
//
// Exits 0 when every prediction is within TOLERANCE (absolute), 1 if not.
const fs = require('fs');
const path = require('path');
const [moduleDir, modelPath, feedsDir, tolText] = process.argv.slice(2);
const ort = require(path.join(moduleDir, 'onnxruntime-node'));
const tolerance = Number(tolText);

function readTensor(spec) {
  const buf = fs.readFileSync(path.join(feedsDir, spec.file));
  const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
  const data = spec.type === 'int64' ? new BigInt64Array(bytes)
                                     : new Float32Array(bytes);
  return new ort.Tensor(spec.type, data, spec.dims);
}

(async () => {
  const feeds = JSON.parse(fs.readFileSync(path.join(feedsDir, 'feeds.json')));
  const session = await ort.InferenceSession.create(modelPath);
  const inputs = {};
  for (const spec of feeds.inputs)
    inputs[spec.name] = readTensor(spec);
  const result = await session.run(inputs);
  const got = result[feeds.output].data;
  const buf = fs.readFileSync(path.join(feedsDir, feeds.expected.file));
  const expected = new Float32Array(
    buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  if (got.length !== expected.length) {
    console.log(`FAILED: ${got.length} outputs, expected ${expected.length}`);
    process.exit(1);
  }
  let worst = 0;
  let at = 0;
  for (let i = 0; i < got.length; ++i) {
    const d = Math.abs(got[i] - expected[i]);
    if (!(d <= worst)) { // NaN counts as worst
      worst = d;
      at = i;
    }
  }
  const width = feeds.expected.dims[1];
  console.log(`onnxruntime-node ${ort.env.versions ? ort.env.versions.common : ''}`
              + `: ${expected.length / width} examples x ${width}, largest `
              + `difference from the evaluator ${worst.toExponential(3)} `
              + `(example ${Math.floor(at / width)})`);
  if (!(worst <= tolerance)) {
    console.log(`FAILED: above the tolerance ${tolerance}`);
    process.exit(1);
  }
})().catch((e) => {
  console.log(`FAILED: ${e.message}`);
  process.exit(1);
});
