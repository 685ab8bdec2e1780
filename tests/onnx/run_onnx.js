// Runs an ONNX model in ONNX Runtime (onnxruntime-node) for test_onnx and bench_onnx:
//   node run_onnx.js ORT_MODULE_DIR MODEL.onnx REQUEST.json
// REQUEST.json: {"inputs": [{"name", "dtype", "dims", "file"}], "outputs_dir": DIR,
// "timed_runs": N, "threads": T}; each input file holds the tensor's bytes (little-endian,
// row-major). The session has T intra-op threads (0 or absent: ONNX Runtime's default). Writes
// DIR/<i>.bin for the i-th model output and DIR/outputs.json: {"outputs": [{"name", "dtype",
// "dims", "file"}] in the model's output order, "ns_per_run"}. With N > 0, after the first run
// N more are timed and ns_per_run is their mean wall time. Exits 1 with the error on stderr
// when the model does not load or run.
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
  const sessionOptions = {};
  if (request.threads > 0) sessionOptions.intraOpNumThreads = request.threads;
  const session = await ort.InferenceSession.create(modelPath, sessionOptions);
  const feeds = {};
  for (const input of request.inputs) {
    const bytes = fs.readFileSync(input.file);
    const Type = arrays[input.dtype];
    if (!Type) throw new Error(`input ${input.name}: unsupported dtype ${input.dtype}`);
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    feeds[input.name] = new ort.Tensor(input.dtype, new Type(buffer), input.dims);
  }
  const results = await session.run(feeds);
  let nsPerRun = 0;
  const timedRuns = request.timed_runs || 0;
  if (timedRuns > 0) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < timedRuns; ++i) await session.run(feeds);
    nsPerRun = Number(process.hrtime.bigint() - start) / timedRuns;
  }
  const written = [];
  session.outputNames.forEach((name, i) => {
    const tensor = results[name];
    const file = path.join(request.outputs_dir, `${i}.bin`);
    const data = tensor.data;
    fs.writeFileSync(file, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    written.push({name, dtype: tensor.type, dims: tensor.dims, file});
  });
  fs.writeFileSync(path.join(request.outputs_dir, 'outputs.json'),
                   JSON.stringify({outputs: written, ns_per_run: nsPerRun}));
}

main().catch((e) => {
  process.stderr.write(`${e.message || e}\n`);
  process.exit(1);
});
