// Runs an ONNX model in ONNX Runtime (onnxruntime-node) for test_onnx:
//   node run_onnx.js ORT_MODULE_DIR MODEL.onnx REQUEST.json
// REQUEST.json: {"inputs": [{"name", "dtype", "dims", "file"}], "outputs_dir": DIR}; each
// input file holds the tensor's bytes (little-endian, row-major). Writes DIR/<i>.bin for the
// i-th model output and DIR/outputs.json: [{"name", "dtype", "dims", "file"}], in the model's
// output order. Exits 1 with the error on stderr when the model does not load or run.
'use strict';
const fs = require('fs');
const path = require('path');

const [ortDir, modelPath, requestPath] = process.argv.slice(2);
const ort = require(ortDir);

const arrays = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

async function main() {
  const request = JSON.parse(fs.readFileSync(requestPath, 'utf8'));
  const session = await ort.InferenceSession.create(modelPath);
  const feeds = {};
  for (const input of request.inputs) {
    const bytes = fs.readFileSync(input.file);
    const Type = arrays[input.dtype];
    if (!Type) throw new Error(`input ${input.name}: unsupported dtype ${input.dtype}`);
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    feeds[input.name] = new ort.Tensor(input.dtype, new Type(buffer), input.dims);
  }
  const results = await session.run(feeds);
  const written = [];
  session.outputNames.forEach((name, i) => {
    const tensor = results[name];
    const file = path.join(request.outputs_dir, `${i}.bin`);
    const data = tensor.data;
    fs.writeFileSync(file, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    written.push({name, dtype: tensor.type, dims: tensor.dims, file});
  });
  fs.writeFileSync(path.join(request.outputs_dir, 'outputs.json'), JSON.stringify(written));
}

main().catch((e) => {
  process.stderr.write(`${e.message || e}\n`);
  process.exit(1);
});
